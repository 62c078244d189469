# anymoe: `make run` sets everything up and answers a chat question with the
# default model; `make test` builds and runs every test.
BUILD_DIR ?= build
JOBS ?= 2
MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT ?= What is the capital of France? Answer in one sentence.

.PHONY: all deps build model run test test-arm64 clean

all: build

deps:
	./scripts/install-deps.sh

$(BUILD_DIR)/build.ninja: | deps
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

$(MODEL):
	./scripts/fetch-default-model.sh

model: $(MODEL)

run: build model
	./$(BUILD_DIR)/src/anymoe run -m $(MODEL) --chat -p "$(PROMPT)" -n 64 -t $(JOBS)

test: build model
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# aarch64: cross-compile the SIMD kernels and run their tests under qemu-aarch64.
test-arm64:
	./scripts/install-arm64-deps.sh && JOBS=$(JOBS) ./scripts/test-arm64.sh

clean:
	rm -rf $(BUILD_DIR)
