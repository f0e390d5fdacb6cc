#!/usr/bin/env python3
"""Renders conversations with tools through the chat templates the models ship, with Jinja2 as
Hugging Face's apply_chat_template runs them, and writes the texts as test vectors for
ChatTemplate's tool rendering (chat_template_tools_test.cpp includes chat_tool_vectors.inc).

The templates are not part of this repository; pass the files holding them:
  --chatml   the chat_template of Qwen/Qwen2.5-0.5B-Instruct's tokenizer_config.json
  --llama-3.1  the chat_template of meta-llama/Meta-Llama-3.1-8B-Instruct's tokenizer_config.json
  --llama-3.2  the chat_template of meta-llama/Llama-3.2-3B-Instruct's (its date from
             strftime_now, given the fixed day TODAY)
  --mistral-v3  the chat_template of mistralai/Mistral-7B-Instruct-v0.3's tokenizer_config.json
  --deepseek-r1  the chat_template of deepseek-ai/DeepSeek-R1-Distill-Llama-8B's (no tools: the
             format takes none in cellm)
  --qwen3    the chat_template of Qwen/Qwen3-0.6B's tokenizer_config.json (thinking, and
             enable_thinking passed as a template variable)
  --mistral-nemo  the chat_template of mistralai/Mistral-Nemo-Instruct-2407's
  --gemma    the chat_template of google/gemma-3-*-it's (no tools: the format takes none)
  --gemma-2  the chat_template of google/gemma-2-2b-it's (no system role)
  --phi-3    the chat_template of microsoft/Phi-3.5-mini-instruct's (eos_token "<|endoftext|>")
  --zephyr   the chat_template of HuggingFaceH4/zephyr-7b-beta's (TinyLlama-1.1B-Chat's too)
  --phi-4-mini  the chat_template of microsoft/Phi-4-mini-instruct's (eos_token "<|endoftext|>")
  --phi-4    the chat_template of microsoft/phi-4's
cellm's chatml has no default system prompt, so where a conversation has no system message the
Qwen2.5 text's default system line (with tools) or turn (without) is removed, which gives what
Qwen3's template renders.

Each vector also carries the JSON texts cellm's caller hands ChatTemplate (each tool's tojson and
tojson(indent=4), its function's fields as text — a string as itself, anything else as tojson —,
each call's arguments' tojson), made here by Python's json.dumps as the templates' tojson makes
them, so the test needs no JSON writer of cellm's. The templates run with bos_token "" (cellm's
renders never hold BOS) and eos_token "</s>" (Phi-3.5's "<|endoftext|>").
"""
import argparse
import json

import jinja2

QWEN_DEFAULT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools"
QWEN_DEFAULT_TURN = ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                     "assistant.<|im_end|>\n")


def tojson(value, indent=None):
    # transformers' chat template environment: ensure_ascii off, no HTML escaping.
    return json.dumps(value, ensure_ascii=False, indent=indent)


def weather_tool():
    return {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]}}}


def search_tool():
    return {"type": "function", "function": {
        "name": "search",
        "description": "Search the web — returns links\nand snippets",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
            "safe": {"type": "boolean", "default": True},
            "weight": {"type": "number", "default": 0.5},
            "tags": {"type": "array", "items": {"type": "string"}, "default": []},
            "extra": {"type": "object", "properties": {}, "default": None}},
            "required": ["query"]}}}


def call(name, arguments, call_id):
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


CASES = [
    ("chatml", "a system message and two tools", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"}], [weather_tool(), search_tool()], True),
    ("chatml", "no system message", [
        {"role": "user", "content": "Weather in Paris?"}], [weather_tool()], True),
    ("chatml", "a round of two calls, their results and the answer", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"city": "Paris"}, "call_1"),
            call("get_weather", {"city": "Oslo", "unit": "celsius"}, "call_2")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "{\"temp\": 4}"},
        {"role": "assistant", "content": "Paris 18, Oslo 4."},
        {"role": "user", "content": "Thanks!"}], [weather_tool()], True),
    ("chatml", "text beside a call, unicode and escapes in the arguments", [
        {"role": "user", "content": "Find \"café\" recipes"},
        {"role": "assistant", "content": "Searching.", "tool_calls": [
            call("search", {"query": "café \"crème\"\n", "limit": 3, "safe": False,
                            "weight": 0.25, "tags": ["a", "b"], "extra": {}}, "c")]},
        {"role": "tool", "tool_call_id": "c", "content": "nothing found"}],
     [search_tool()], True),
    ("chatml", "no generation prompt", [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "U"}], [weather_tool()], False),
    ("llama-3.1", "a system message and two tools", [
        {"role": "system", "content": " Be brief. "},
        {"role": "user", "content": "Weather in Paris?\n"}], [weather_tool(), search_tool()], True),
    ("llama-3.1", "no system message", [
        {"role": "user", "content": "Weather in Paris?"}], [weather_tool()], True),
    ("llama-3.1", "a call, its result and the answer", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"city": "Paris", "unit": "celsius"}, "call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, \"sunny\""},
        {"role": "assistant", "content": " Paris: 18. "},
        {"role": "user", "content": "And Oslo?"}], [weather_tool()], True),
    ("llama-3.1", "unicode and escapes in the tools and arguments", [
        {"role": "user", "content": "Find café"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("search", {"query": "café \"crème\"\n", "weight": 1.5, "tags": []}, "c")]},
        {"role": "tool", "tool_call_id": "c", "content": "nothing\nfound"}],
     [search_tool()], True),
]


def template_messages(messages):
    # vLLM hands templates each call's arguments as an object, not as the client's string.
    out = []
    for m in messages:
        m = dict(m)
        if "tool_calls" in m:
            m["tool_calls"] = [{**c, "function": {**c["function"], "arguments": json.loads(
                c["function"]["arguments"])}} for c in m["tool_calls"]]
        out.append(m)
    return out


MISTRAL_CASES = [
    ("mistral-v3", "tools before the last user message, the system text in it", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"}], [weather_tool(), search_tool()], True),
    ("mistral-v3", "a round of two calls, their results and the answer", [
        {"role": "user", "content": "Weather in Paris and in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"city": "Paris"}, "a1B2c3D4e"),
            call("get_weather", {"city": "Oslo", "unit": "celsius"}, "Z9y8X7w6V")]},
        {"role": "tool", "tool_call_id": "a1B2c3D4e", "content": "18 degrees"},
        {"role": "tool", "tool_call_id": "Z9y8X7w6V", "content": "{\"temp\": 4}"},
        {"role": "assistant", "content": " Paris 18, Oslo 4. "},
        {"role": "user", "content": "Thanks, and café \"crème\"?"}], [weather_tool(), search_tool()], True),
    ("mistral-v3", "no tools: turns, and a system text that only the last message shows", [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"}], [], True),
    ("mistral-v3", "a conversation that ends with a result", [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("search", {"query": "x"}, "abcdefghi")]},
        {"role": "tool", "tool_call_id": "abcdefghi", "content": "nothing"}], [search_tool()], True),
]
CASES += MISTRAL_CASES
# Mistral-Nemo: the same conversations through its template.
CASES += [("mistral-nemo",) + c[1:] for c in MISTRAL_CASES]

# Llama 3.1's dated system turn without tools; Llama 3.2's dated by strftime_now (TODAY here).
LLAMA_CASES = [
    ("llama-3.1", "no tools: the dated system turn holds the system text", [
        {"role": "system", "content": " Be brief. "},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": " Hello. "},
        {"role": "user", "content": "2+2?"}], [], True),
    ("llama-3.1", "no tools, no system message: the dated system turn alone", [
        {"role": "user", "content": "Hi!"}], [], True),
    ("llama-3.2", "dated by the day it is rendered", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi!"}], [], True),
    ("llama-3.2", "dated by the day it is rendered, with tools", [
        {"role": "user", "content": "Weather in Paris?"}], [weather_tool()], True),
]
CASES += LLAMA_CASES
TODAY = "05 Dec 2026"


DEEPSEEK_CASES = [
    ("deepseek-r1", "a system text, turns, an answer's thinking left out", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "<think>\nA greeting.\n</think>\n\nHello."},
        {"role": "user", "content": " 2+2? "}], [], True),
    ("deepseek-r1", "no system text, no generation prompt", [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a</think>b</think>c"}], [], False),
]
CASES += DEEPSEEK_CASES

# Qwen3: (format, name, messages, tools, add_generation_prompt, template variables).
QWEN3_CASES = [
    ("qwen3", "an earlier answer's thinking left out, thinking switched off", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "<think>\nA greeting.\n</think>\n\nHello."},
        {"role": "user", "content": "2+2?"}], [], True, {"enable_thinking": False}),
    ("qwen3", "thinking on: the generation prompt alone", [
        {"role": "user", "content": "Hi!"}], [], True, {"enable_thinking": True}),
    ("qwen3", "a tool round after the last query shows its thinking", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris and in Oslo?"},
        {"role": "assistant", "content": "", "reasoning_content": "\nTwo cities: two calls.\n",
         "tool_calls": [call("get_weather", {"city": "Paris"}, "call_1"),
                        call("get_weather", {"city": "Oslo", "unit": "celsius"}, "call_2")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees, sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "{\"temp\": 4}"},
        {"role": "assistant", "content": "<think>Both known.</think>\n\nParis 18, Oslo 4."}],
     [weather_tool()], False, {}),
    ("qwen3", "calls beside text, an answer without thinking in the round, no system", [
        {"role": "user", "content": "Find café"},
        {"role": "assistant", "content": "Searching.", "tool_calls": [
            call("search", {"query": "café", "tags": []}, "c")]},
        {"role": "tool", "tool_call_id": "c", "content": "nothing found"},
        {"role": "assistant", "content": "Nothing.", "tool_calls": [
            call("search", {"query": "cafe"}, "d")]},
        {"role": "tool", "tool_call_id": "d", "content": "one"}], [search_tool()], True, {}),
    ("qwen3", "a tool response sent as user text is no query", [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "<think>\n\nplan\n\n</think>\n\n\nfirst"},
        {"role": "user", "content": "<tool_response>\nx\n</tool_response>"},
        {"role": "assistant", "content": "a\n<think>b</think>c<think>d</think>\ne"}], [], False,
     {}),
    ("qwen3", "reasoning_content sent: the content's tags stay, empty thinking shown last", [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "x</think>y", "reasoning_content": ""},
        {"role": "user", "content": "v"},
        {"role": "assistant", "content": "\nz", "reasoning_content": "r"}], [], False, {}),
]
CASES += [c[:5] for c in QWEN3_CASES]
KWARGS = {(c[0], c[1]): c[5] for c in QWEN3_CASES}

# Gemma (no tools): Gemma 3's template (the system text before the first user message), and
# Gemma 2's for a conversation without one; both strip each message.
GEMMA_CASES = [
    ("gemma", "Gemma 3: the system text opens the first user turn, messages stripped", [
        {"role": "system", "content": " Be brief. "},
        {"role": "user", "content": " Hi! "},
        {"role": "assistant", "content": "\nHello.\n"},
        {"role": "user", "content": "2+2?"}], [], True),
    ("gemma", "Gemma 2: no system message, no generation prompt", [
        {"role": "user", "content": "\tHi!"},
        {"role": "assistant", "content": "Hello. "}], [], False),
]
CASES += GEMMA_CASES
TEMPLATE_OF = {("gemma", GEMMA_CASES[1][1]): "gemma-2"}

# Phi-3.5-mini-instruct's template (no tools), its end of text "<|endoftext|>".
PHI_CASES = [
    ("phi-3", "a system message, turns", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": " Hi! "},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "2+2?"}], [], True),
    ("phi-3", "an empty system message left out, no generation prompt", [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello."}], [], False),
]
CASES += PHI_CASES

# Zephyr's template (TinyLlama-1.1B-Chat's too; no tools).
ZEPHYR_CASES = [
    ("zephyr", "a system message, turns", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": " Hi! "},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "2+2?"}], [], True),
    ("zephyr", "no generation prompt", [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello."}], [], False),
]
CASES += ZEPHYR_CASES

# Phi-4-mini's and Phi-4's templates (no tools): no line breaks anywhere.
PHI4_CASES = [
    ("phi-4-mini", "a system message, turns", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": " Hi! "},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "2+2?"}], [], True),
    ("phi-4-mini", "an empty system message kept, no generation prompt", [
        {"role": "system", "content": ""},
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello.\n"}], [], False),
    ("phi-4", "a system message, turns", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": " Hi! "},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "2+2?"}], [], True),
    ("phi-4", "no system message, no generation prompt", [
        {"role": "user", "content": "Hi!\n"},
        {"role": "assistant", "content": "Hello."}], [], False),
]
CASES += PHI4_CASES

# date_string and tools_in_user_message passed as template variables.
DATE_CASES = [
    ("llama-3.1", "a date_string passed", [
        {"role": "user", "content": "Hi!"}], [], True, {"date_string": "01 Jan 2030"}),
    ("llama-3.2", "a date_string passed overrides the day", [
        {"role": "user", "content": "Hi!"}], [], True, {"date_string": "01 Jan 2030"}),
    ("llama-3.1", "the tools in the system turn (tools_in_user_message off)", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"}], [weather_tool(), search_tool()], True,
     {"tools_in_user_message": False}),
    ("llama-3.2", "the tools in the system turn (tools_in_user_message off), no system message", [
        {"role": "user", "content": "Weather in Paris?"}], [weather_tool()], True,
     {"tools_in_user_message": False}),
]
CASES += [c[:5] for c in DATE_CASES]
KWARGS.update({(c[0], c[1]): c[5] for c in DATE_CASES})

# The final message continued (vLLM's continue_final_message): rendered without a generation
# prompt and cut as Hugging Face's apply_chat_template cuts it (continue_cut).
CONTINUE_CASES = [
    ("chatml", "continuing an answer", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "The capital is"}], [], False),
    ("chatml", "continuing an answer whose trailing space the format keeps", [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Sure, "}], [], False),
    ("llama-3.1", "continuing an answer the format strips", [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "  Paris is "}], [], False),
    ("mistral-nemo", "continuing an answer", [
        {"role": "user", "content": "Bonjour?"},
        {"role": "assistant", "content": "Bonjour"}], [], False),
    ("qwen3", "continuing an answer whose thinking came apart", [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris", "reasoning_content": "Easy."}], [], False),
    ("deepseek-r1", "continuing an answer", [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello there"}], [], False),
]
CASES += CONTINUE_CASES
CONTINUED = {(c[0], c[1]) for c in CONTINUE_CASES}


def continue_cut(rendered, final_message):
    # transformers' apply_chat_template with continue_final_message=True.
    loc = rendered.rindex(final_message.strip())
    if rendered[loc:loc + len(final_message.lstrip())] == final_message:
        return rendered[:loc + len(final_message.lstrip())]
    return rendered[:loc + len(final_message.strip())]


def function_fields(tool):
    return [[key, tojson(value) if not isinstance(value, str) else value, isinstance(value, str)]
            for key, value in tool["function"].items() if key != "return"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chatml", required=True)
    parser.add_argument("--llama-3.1", dest="llama3", required=True)
    parser.add_argument("--mistral-v3", dest="mistral3", required=True)
    parser.add_argument("--deepseek-r1", dest="deepseek", required=True)
    parser.add_argument("--qwen3", required=True)
    parser.add_argument("--llama-3.2", dest="llama32", required=True)
    parser.add_argument("--gemma", required=True)
    parser.add_argument("--phi-3", dest="phi3", required=True)
    parser.add_argument("--zephyr", required=True)
    parser.add_argument("--phi-4-mini", dest="phi4mini", required=True)
    parser.add_argument("--phi-4", dest="phi4", required=True)
    parser.add_argument("--mistral-nemo", dest="nemo", required=True)
    parser.add_argument("--gemma-2", dest="gemma2", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    sources = {"chatml": open(args.chatml).read(), "llama-3.1": open(args.llama3).read(),
               "llama-3.2": open(args.llama32).read(),
               "mistral-v3": open(args.mistral3).read(), "deepseek-r1": open(args.deepseek).read(),
               "qwen3": open(args.qwen3).read(), "gemma": open(args.gemma).read(),
               "gemma-2": open(args.gemma2).read(), "mistral-nemo": open(args.nemo).read(),
               "phi-3": open(args.phi3).read(), "zephyr": open(args.zephyr).read(),
               "phi-4-mini": open(args.phi4mini).read(), "phi-4": open(args.phi4).read()}
    vectors = []
    for fmt, name, messages, tools, add_generation_prompt in CASES:
        kwargs = KWARGS.get((fmt, name), {})
        text = env.from_string(sources[TEMPLATE_OF.get((fmt, name), fmt)]).render(
            messages=template_messages(messages), tools=tools or None,
            add_generation_prompt=add_generation_prompt, bos_token="",
            eos_token="<|endoftext|>" if fmt in ("phi-3", "phi-4-mini") else "</s>",
            strftime_now=lambda fmt: TODAY, **kwargs)
        continued = (fmt, name) in CONTINUED
        if continued:
            text = continue_cut(text, messages[-1]["content"])
        if fmt == "chatml" and messages[0]["role"] != "system" and tools:
            assert QWEN_DEFAULT in text
            text = text.replace(QWEN_DEFAULT, "# Tools", 1)
        elif fmt == "chatml" and messages[0]["role"] != "system":
            assert text.startswith(QWEN_DEFAULT_TURN)
            text = text[len(QWEN_DEFAULT_TURN):]
        vectors.append({
            "format": fmt, "name": name, "messages": messages,
            "tools": [{"name": t["function"]["name"], "json": tojson(t),
                       "json_indented": tojson(t, indent=4),
                       "function_fields": function_fields(t)} for t in tools],
            "arguments_json": [[tojson(json.loads(c["function"]["arguments"]))
                                for c in m.get("tool_calls", [])] for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "enable_thinking": kwargs.get("enable_thinking", True),
            "date_string": kwargs.get("date_string", ""), "today": TODAY,
            "tools_in_user_message": kwargs.get("tools_in_user_message", True),
            "continue_final_message": continued, "expected": text})
    with open(args.output, "w") as f:
        f.write("// Generated by tools/gen_chat_tool_vectors.py; do not edit.\n")
        f.write('R"vectors(' + json.dumps(vectors, ensure_ascii=False, indent=1) + ')vectors"\n')


if __name__ == "__main__":
    main()
