# Front end for the CMake presets. The two commands a newcomer needs:
#   make run   — install what is missing, build the release preset, generate on the default model
#   make test  — install what is missing, build the dev preset, run every test with ctest
MODELS ?= ../shared/models
MODEL ?= $(MODELS)/stories260K.gguf
JOBS ?= $(shell nproc)
CELLM_RELEASE := build/release/apps/cellm/cellm
# CUDA tests run only where a GPU is visible (scripts/device-check runs them on the device).
CTEST_GPU_FILTER := $(shell nvidia-smi -L >/dev/null 2>&1 || echo -LE cuda)

.PHONY: all deps run test build release asan-ubsan tsan no-http fuzz ci format tidy clean

all: build

deps:
	@scripts/install-deps

build: deps
	cmake --preset dev >/dev/null
	cmake --build --preset dev -j $(JOBS)

release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# Only the binary: the main job needs no tests or benchmarks.
run: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target cellm
	scripts/demo $(CELLM_RELEASE) $(MODEL)

test: build
	CELLM_TEST_MODELS=$(abspath $(MODELS)) ctest --preset dev -j $(JOBS) $(CTEST_GPU_FILTER)

asan-ubsan: deps
	cmake --preset asan-ubsan >/dev/null
	cmake --build --preset asan-ubsan -j $(JOBS) --target cellm_tests_unit
	CELLM_TEST_MODELS=$(abspath $(MODELS)) ctest --preset asan-ubsan -j $(JOBS) -L unit

tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS) --target cellm_tests_threads
	CELLM_TEST_MODELS=$(abspath $(MODELS)) ctest --preset tsan -j $(JOBS) -L threads

# `cellm serve` without cpp-httplib (as on machines that lack it, the device's among them: the
# command then says it has no server): the one file whose code differs, compiled alone.
no-http: deps
	cmake --preset dev -B build/no-http -DCELLM_HTTP=OFF -DCELLM_CUDA=OFF -DCELLM_BENCH=OFF \
	  >/dev/null
	cmake --build build/no-http -j $(JOBS) --target apps/cellm/CMakeFiles/cellm_app.dir/cmd_serve.cpp.o

# Builds the libFuzzer targets, writes seed corpora under build/fuzz/corpus (gguf_fuzz_seeds from
# the test models; the arch models' safetensors files; the tokenizer vectors' texts), then fuzzes
# each reader and the tokenizer for FUZZ_SECONDS. The Hugging Face JSON parsers: the arch models'
# config.json files and hf_tokenizer_fuzz_seeds' tokenizers, with fuzz/hf_json.dict.
# What reads a GGUF model's or program's meaning (model_load_fuzz): model_fuzz_seeds' models, cut
# vocabularies and exported programs. The HTTP server's request parser (serve_request_fuzz):
# fuzz/serve_seeds with fuzz/serve_json.dict. The JSON prefix recognizer of constrained output
# (json_prefix_fuzz, against nlohmann::json): fuzz/json_prefix_seeds. The JSON-schema compiler and
# walker (json_schema_fuzz, against an independent validator): fuzz/json_schema_seeds. Whole-text
# patterns, vLLM's guided_regex (text_pattern_fuzz, against the standard library's regex):
# fuzz/text_pattern_seeds.
FUZZ_SECONDS ?= 30
FUZZ_CORPUS := build/fuzz/corpus
fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS) --target gguf_fuzz_seeds gguf_reader_fuzz safetensors_fuzz \
	  tokenizer_fuzz
	mkdir -p $(FUZZ_CORPUS)/gguf $(FUZZ_CORPUS)/safetensors $(FUZZ_CORPUS)/tokenizer
	build/fuzz/fuzz/gguf_fuzz_seeds $(FUZZ_CORPUS)/gguf $(MODELS)/stories260K.gguf \
	  $(MODELS)/llama-2-tiny-random.gguf $(wildcard $(MODELS)/arch/*.gguf)
	for f in $(MODELS)/arch/*-hf/*.safetensors; do \
	  cp "$$f" $(FUZZ_CORPUS)/safetensors/$$(basename $$(dirname "$$f")).safetensors; done
	build/fuzz/fuzz/gguf_reader_fuzz $(FUZZ_CORPUS)/gguf -max_total_time=$(FUZZ_SECONDS)
	build/fuzz/fuzz/safetensors_fuzz $(FUZZ_CORPUS)/safetensors -max_total_time=$(FUZZ_SECONDS)
	cp $(MODELS)/vocab/*.inp $(FUZZ_CORPUS)/tokenizer/
	CELLM_TEST_MODELS=$(abspath $(MODELS)) build/fuzz/fuzz/tokenizer_fuzz $(FUZZ_CORPUS)/tokenizer \
	  -max_total_time=$(FUZZ_SECONDS)
	cmake --build --preset fuzz -j $(JOBS) --target hf_config_fuzz hf_tokenizer_fuzz \
	  hf_tokenizer_fuzz_seeds
	mkdir -p $(FUZZ_CORPUS)/hf_config $(FUZZ_CORPUS)/hf_tokenizer
	for f in $(MODELS)/arch/*-hf/config.json; do \
	  cp -f "$$f" $(FUZZ_CORPUS)/hf_config/$$(basename $$(dirname "$$f")).json; done
	build/fuzz/fuzz/hf_tokenizer_fuzz_seeds $(FUZZ_CORPUS)/hf_tokenizer
	build/fuzz/fuzz/hf_config_fuzz -dict=fuzz/hf_json.dict $(FUZZ_CORPUS)/hf_config \
	  -max_total_time=$(FUZZ_SECONDS)
	build/fuzz/fuzz/hf_tokenizer_fuzz -dict=fuzz/hf_json.dict $(FUZZ_CORPUS)/hf_tokenizer \
	  -max_total_time=$(FUZZ_SECONDS)
	cmake --build --preset fuzz -j $(JOBS) --target model_fuzz_seeds model_load_fuzz
	mkdir -p $(FUZZ_CORPUS)/model
	build/fuzz/fuzz/model_fuzz_seeds $(FUZZ_CORPUS)/model $(MODELS)/stories260K.gguf \
	  $(MODELS)/llama-2-tiny-random.gguf $(wildcard $(MODELS)/arch/*.gguf)
	build/fuzz/fuzz/model_load_fuzz $(FUZZ_CORPUS)/model -max_total_time=$(FUZZ_SECONDS) \
	  -malloc_limit_mb=512
	cmake --build --preset fuzz -j $(JOBS) --target serve_request_fuzz
	mkdir -p $(FUZZ_CORPUS)/serve
	cp -f fuzz/serve_seeds/* $(FUZZ_CORPUS)/serve/
	build/fuzz/fuzz/serve_request_fuzz -dict=fuzz/serve_json.dict $(FUZZ_CORPUS)/serve \
	  -max_total_time=$(FUZZ_SECONDS)
	cmake --build --preset fuzz -j $(JOBS) --target json_prefix_fuzz
	mkdir -p $(FUZZ_CORPUS)/json_prefix
	cp -f fuzz/json_prefix_seeds/* $(FUZZ_CORPUS)/json_prefix/
	build/fuzz/fuzz/json_prefix_fuzz -dict=fuzz/serve_json.dict $(FUZZ_CORPUS)/json_prefix \
	  -max_total_time=$(FUZZ_SECONDS)
	cmake --build --preset fuzz -j $(JOBS) --target json_schema_fuzz
	mkdir -p $(FUZZ_CORPUS)/json_schema
	cp -f fuzz/json_schema_seeds/* $(FUZZ_CORPUS)/json_schema/
	build/fuzz/fuzz/json_schema_fuzz -dict=fuzz/json_schema.dict $(FUZZ_CORPUS)/json_schema \
	  -max_total_time=$(FUZZ_SECONDS)
	cmake --build --preset fuzz -j $(JOBS) --target text_pattern_fuzz
	mkdir -p $(FUZZ_CORPUS)/text_pattern
	cp -f fuzz/text_pattern_seeds/* $(FUZZ_CORPUS)/text_pattern/
	build/fuzz/fuzz/text_pattern_fuzz -dict=fuzz/json_schema.dict $(FUZZ_CORPUS)/text_pattern \
	  -max_total_time=$(FUZZ_SECONDS)

ci:
	.ci/run

format:
	git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i

tidy: build
	git ls-files 'src/*.cpp' | xargs clang-tidy -p build/dev --quiet

clean:
	rm -rf build
