// One request's generations and their responses (serve_exchange.h).
#include "serve_exchange.h"

#include <condition_variable>
#include <mutex>

#include "core/check.h"

namespace cellm::app {

// Shared with the generations' callbacks (the engine thread), which may outlive the exchange: a
// cancelled generation's last update can come after the request is gone.
struct ServeExchange::Delivery {
  struct Pending {
    std::string text;
    std::vector<int32_t> tokens;
    std::vector<TokenLogprobs> logprobs;         // one per token when the request asked for them
    std::vector<TokenLogprobs> prompt_logprobs;  // with the first update, when asked for them
    bool finished = false;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Pending> pending;  // guarded by mutex; [choices]

  static GenerationCallback callback(const std::shared_ptr<Delivery>& delivery, size_t choice) {
    return [delivery, choice](const GenerationUpdate& update) {
      {
        std::lock_guard<std::mutex> lock(delivery->mutex);
        Pending& p = delivery->pending[choice];
        p.text.append(update.text);
        p.tokens.insert(p.tokens.end(), update.tokens.begin(), update.tokens.end());
        p.logprobs.insert(p.logprobs.end(), update.logprobs.begin(), update.logprobs.end());
        p.prompt_logprobs.insert(p.prompt_logprobs.end(), update.prompt_logprobs.begin(),
                                 update.prompt_logprobs.end());
        p.finished = p.finished || update.finished;
      }
      delivery->cv.notify_all();
    };
  }
};

ServeExchange::ServeExchange(Runner& runner, ServeRequest request, ServeResult header,
                             std::vector<GenConfig> configs, TokenPieceFn token_piece)
    : request_(std::move(request)),
      token_piece_(std::move(token_piece)),
      result_(std::move(header)),
      delivery_(std::make_shared<Delivery>()) {
  const size_t num_choices = configs.size();
  const size_t n = static_cast<size_t>(request_.n);
  CELLM_CHECK(num_choices == result_.prompt_tokens.size() * n)
      << "one GenConfig per choice: " << num_choices << " for " << result_.prompt_tokens.size()
      << " prompts x " << n;
  delivery_->pending.resize(num_choices);
  result_.choices.resize(num_choices);
  first_sent_.assign(num_choices, false);
  final_sent_.assign(num_choices, false);
  echoed_.assign(num_choices, false);
  logprobs_sent_.assign(num_choices, 0);
  if (request_.tools.reads_calls()) {
    tool_streams_.assign(num_choices, ToolCallStream(request_.tools));
  }
  if (request_.reasoning != ReasoningParser::kNone) {
    reasoning_streams_.assign(num_choices, ReasoningStream(request_.reasoning));
  }
  for (size_t k = 0; k < num_choices; ++k) {
    sessions_.push_back(runner.open_session());
    handles_.push_back(sessions_.back().generate_async(
        result_.prompt_tokens[k / n], std::move(configs[k]), Delivery::callback(delivery_, k)));
  }
}

ServeExchange::~ServeExchange() { end(); }

bool ServeExchange::wait_all(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const GenerationHandle& handle : handles_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!handle.wait_for(std::max(left, std::chrono::milliseconds(0)))) return false;
  }
  return true;
}

// A generation that ended kFailed: refused at submit (it never ran a step) is the request's
// fault, anything later the server's.
Status ServeExchange::failure_of(size_t choice) const {
  const GenerationHandle& handle = handles_[choice];
  const std::string message = handle.error_message();
  return handle.metrics().first_step_us < 0 ? invalid_argument(message) : internal_error(message);
}

void ServeExchange::add_logprobs(size_t k, const std::vector<TokenLogprobs>& logprobs) {
  std::vector<ServeTokenLogprobs>& shown = result_.choices[k].logprobs;
  for (const TokenLogprobs& entry : logprobs) {
    ServeTokenLogprobs& s = shown.emplace_back();
    s.sampled = {token_piece_(entry.token), entry.logprob};
    for (const auto& [id, logprob] : entry.top) s.top.push_back({token_piece_(id), logprob});
  }
}

void ServeExchange::add_prompt_logprobs(size_t k,
                                        const std::vector<TokenLogprobs>& prompt_logprobs) {
  const std::vector<int32_t>& prompt = result_.prompt_tokens[k / static_cast<size_t>(request_.n)];
  if (prompt.empty()) return;
  ServeTokenLogprobs& first = result_.choices[k].logprobs.emplace_back();
  first.sampled = {token_piece_(prompt.front()), std::nullopt};  // at position 0: nothing before
  add_logprobs(k, prompt_logprobs);
}

StatusOr<nlohmann::ordered_json> ServeExchange::whole_response(bool stopping) {
  for (size_t k = 0; k < handles_.size(); ++k) {
    CELLM_CHECK(handles_[k].done()) << "whole_response before choice " << k << " ended";
    const FinishReason reason = handles_[k].finish_reason();
    if (reason == FinishReason::kFailed) return failure_of(k);
    if (reason == FinishReason::kCancelled && stopping) {
      return cancelled("the server stopped before the generation ended");
    }
    ServeChoice& choice = result_.choices[k];
    choice.text = handles_[k].text();
    if (request_.reasoning != ReasoningParser::kNone) {
      ReasoningSplit split = split_reasoning(request_.reasoning, choice.text);
      choice.reasoning = std::move(split.reasoning);
      choice.text = std::move(split.content);
    }
    if (request_.tools.reads_calls()) {
      ToolCallOutput output = read_tool_calls(request_.tools, choice.text);
      choice.text = std::move(output.content);
      choice.tool_calls = std::move(output.calls);
    }
    choice.finish_reason = reason;
    choice.tokens = handles_[k].tokens();
    choice.logprobs.clear();
    std::vector<TokenLogprobs> logprobs;
    std::vector<TokenLogprobs> prompt_logprobs;
    {
      std::lock_guard<std::mutex> lock(delivery_->mutex);  // done: no update comes any more
      logprobs = delivery_->pending[k].logprobs;
      prompt_logprobs = delivery_->pending[k].prompt_logprobs;
    }
    if (request_.config.sampling.prompt_logprobs >= 0) add_prompt_logprobs(k, prompt_logprobs);
    add_logprobs(k, logprobs);
  }
  return completion_response_json(request_, result_);
}

std::string ServeExchange::next_events(std::chrono::milliseconds timeout, bool& done) {
  done = false;
  // Token ids and log-probabilities go out with their tokens, even before any text does.
  const bool want_ids = request_.return_token_ids || request_.config.sampling.logprobs >= 0;
  std::vector<Delivery::Pending> news(handles_.size());
  {
    std::unique_lock<std::mutex> lock(delivery_->mutex);
    delivery_->cv.wait_for(lock, timeout, [&] {
      for (size_t k = 0; k < handles_.size(); ++k) {
        const Delivery::Pending& p = delivery_->pending[k];
        if (!p.text.empty() || (want_ids && !p.tokens.empty()) || (p.finished && !final_sent_[k])) {
          return true;
        }
      }
      return false;
    });
    for (size_t k = 0; k < handles_.size(); ++k) {
      Delivery::Pending& p = delivery_->pending[k];
      news[k].text.swap(p.text);
      news[k].tokens.swap(p.tokens);
      news[k].logprobs.swap(p.logprobs);
      news[k].prompt_logprobs.swap(p.prompt_logprobs);
      news[k].finished = p.finished;
    }
  }
  const bool chat = request_.endpoint == ServeEndpoint::kChatCompletions;
  std::string events;
  for (size_t k = 0; k < handles_.size(); ++k) {
    if (chat && !first_sent_[k]) {  // the role first, as OpenAI's streams do
      events += sse_event(completion_chunk_json(request_, result_, k, "", {}, true, std::nullopt,
                                                logprobs_sent_[k]));
      first_sent_[k] = true;
    }
    ServeChoice& choice = result_.choices[k];
    const Delivery::Pending& p = news[k];
    choice.text += p.text;
    choice.tokens.insert(choice.tokens.end(), p.tokens.begin(), p.tokens.end());
    if (request_.config.sampling.prompt_logprobs >= 0 && !p.prompt_logprobs.empty()) {
      add_prompt_logprobs(k, p.prompt_logprobs);
    }
    add_logprobs(k, p.logprobs);
    // Thinking goes out as reasoning_content; of the answer, what may be a tool call waits for the
    // choice's end. Echo: the prompt's text leads the choice's first chunk.
    ReasoningStream::Pieces pieces = take_text(k, p.text, /*last=*/false);
    if (!pieces.reasoning.empty()) {
      events +=
          sse_event(reasoning_chunk_json(request_, result_, k, pieces.reasoning, !first_sent_[k]));
      first_sent_[k] = true;
    }
    std::string text = std::move(pieces.content);
    if (request_.echo && !echoed_[k] &&
        (!p.text.empty() || (want_ids && !p.tokens.empty()) || p.finished)) {
      text = result_.prompt_texts[k / static_cast<size_t>(request_.n)] + text;
      echoed_[k] = true;
    }
    if (!text.empty() || (want_ids && !p.tokens.empty())) {
      events += sse_event(completion_chunk_json(request_, result_, k, text, p.tokens,
                                                !first_sent_[k], {}, logprobs_sent_[k]));
      first_sent_[k] = true;
      logprobs_sent_[k] = choice.logprobs.size();
    }
    if (!p.finished || final_sent_[k]) continue;
    handles_[k].wait();  // the final update arrived: done is set right after it
    choice.finish_reason = handles_[k].finish_reason();
    final_sent_[k] = true;
    if (choice.finish_reason == FinishReason::kFailed) {
      cancel();  // one failed choice fails the request
      done = true;
      return events + sse_event(error_json(failure_of(k))) + sse_done();
    }
    if (!tool_streams_.empty() || !reasoning_streams_.empty()) {
      const ReasoningStream::Pieces rest = take_text(k, "", /*last=*/true);
      if (!rest.reasoning.empty()) {
        events +=
            sse_event(reasoning_chunk_json(request_, result_, k, rest.reasoning, !first_sent_[k]));
        first_sent_[k] = true;
      }
      if (!rest.content.empty()) {
        events += sse_event(completion_chunk_json(request_, result_, k, rest.content, {},
                                                  !first_sent_[k], {}, logprobs_sent_[k]));
        first_sent_[k] = true;
      }
      if (!choice.tool_calls.empty()) {
        events += sse_event(tool_calls_chunk_json(request_, result_, k));
      }
    }
    events += sse_event(completion_chunk_json(request_, result_, k, "", {}, !first_sent_[k],
                                              choice.finish_reason, logprobs_sent_[k]));
    first_sent_[k] = true;
    logprobs_sent_[k] = choice.logprobs.size();
  }
  for (const bool sent : final_sent_) {
    if (!sent) return events;
  }
  if (request_.stream_include_usage) events += sse_event(usage_chunk_json(request_, result_));
  done = true;
  return events + sse_done();
}

ReasoningStream::Pieces ServeExchange::take_text(size_t k, std::string_view delta, bool last) {
  ReasoningStream::Pieces pieces;
  if (reasoning_streams_.empty()) {
    pieces.content = delta;
  } else {
    pieces = reasoning_streams_[k].push(delta);
    if (last) {
      ReasoningStream::Pieces rest = reasoning_streams_[k].finish();
      pieces.reasoning += rest.reasoning;
      pieces.content += rest.content;
    }
  }
  if (!tool_streams_.empty()) {
    std::string shown = tool_streams_[k].push(pieces.content);
    if (last) {
      ToolCallOutput rest = tool_streams_[k].finish();
      shown += rest.content;
      result_.choices[k].tool_calls = std::move(rest.calls);
    }
    pieces.content = std::move(shown);
  }
  return pieces;
}

void ServeExchange::cancel() {
  for (const GenerationHandle& handle : handles_) {
    if (handle.valid() && !handle.done()) handle.cancel();
  }
}

void ServeExchange::end() {
  if (ended_) return;
  ended_ = true;
  cancel();
  for (Session& session : sessions_) {
    if (session.valid()) session.close();
  }
}

}  // namespace cellm::app
