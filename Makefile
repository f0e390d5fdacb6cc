# Front end for the CMake presets. The two commands a newcomer needs:
#   make run   — install what is missing, build the release preset, generate on the default model
#   make test  — install what is missing, build the dev preset, run every test with ctest
MODELS ?= ../shared/models
MODEL ?= $(MODELS)/stories260K.gguf
JOBS ?= $(shell nproc)
CELLM_RELEASE := build/release/apps/cellm/cellm

.PHONY: all deps run test build release asan-ubsan tsan fuzz ci format tidy clean

all: build

deps:
	@scripts/install-deps

build: deps
	cmake --preset dev >/dev/null
	cmake --build --preset dev -j $(JOBS)

release: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

run: release
	scripts/demo $(CELLM_RELEASE) $(MODEL)

test: build
	CELLM_TEST_MODELS=$(abspath $(MODELS)) ctest --preset dev -j $(JOBS)

asan-ubsan: deps
	cmake --preset asan-ubsan >/dev/null
	cmake --build --preset asan-ubsan -j $(JOBS)
	CELLM_TEST_MODELS=$(abspath $(MODELS)) ctest --preset asan-ubsan -j $(JOBS) -L unit

tsan: deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS)
	CELLM_TEST_MODELS=$(abspath $(MODELS)) ctest --preset tsan -j $(JOBS) -L threads

fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)

ci:
	.ci/run

format:
	git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i

tidy: build
	git ls-files 'src/*.cpp' | xargs clang-tidy -p build/dev --quiet

clean:
	rm -rf build
