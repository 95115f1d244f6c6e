# kerac — the whole set-up is `make run` and `make test` (see README.md).
BUILD    ?= build
ASAN     ?= build-asan
JOBS     ?= $(shell nproc)
EPOCHS   ?= 3
CMAKE_FLAGS ?=

.PHONY: all deps build run test test-fast asan bench install clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Trains the default CNN (Keras's mnist_convnet) on Fashion-MNIST for 3 epochs.
run: build
	$(BUILD)/kerac train --epochs $(EPOCHS)

# Every test, then the unit tests again under AddressSanitizer + UBSan.
test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) --no-print-directory asan
	$(MAKE) --no-print-directory fuzz-smoke

test-fast: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS) -L unit

asan: deps
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DKERAC_SANITIZE=ON -DKERAC_CUDA=OFF >/dev/null
	cmake --build $(ASAN) -j$(JOBS)
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    KERAC_SANITIZED=1 ctest --output-on-failure -j$(JOBS) -L unit

bench: build
	bench/run.sh

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN)

# libFuzzer targets (clang, ASan + UBSan) for the JSON config, .keras, IDX and .npy readers:
# FUZZ_SECONDS each (default 20) from the seed corpora in fuzz/corpus/; fails on any finding.
FUZZ_SECONDS ?= 20
# make test: a reproducible smoke run (fixed seed, this many inputs per target) of kerac's
# own parsers (JSON config, IDX, .npy) and of the .keras/.h5 reader (fewer: libhdf5 under
# the sanitizers' slow unwinder runs about 30 inputs a second, 10 on a loaded machine); a
# generous per-input timeout, so that a loaded machine does not fail it
FUZZ_RUNS ?= 2000
FUZZ_KERAS_RUNS ?= 600
.PHONY: fuzz fuzz-smoke
fuzz-smoke: deps
	FUZZ_SEED=1 FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_TIMEOUT=30 fuzz/run.sh 0 json idx npy image
	FUZZ_SEED=1 FUZZ_RUNS=$(FUZZ_KERAS_RUNS) FUZZ_TIMEOUT=30 fuzz/run.sh 0 keras
fuzz: deps
	fuzz/run.sh $(FUZZ_SECONDS)

# augment block: every keras.applications family and the keras.io CNN examples, written by
# Keras 3 (and tf-keras when /tmp/tfvenv is ready), checked in kerac: params, predictions,
# a one-epoch fine-tune, Keras reloading kerac's file. Not part of `make test` (hundreds of
# MB of files, written and deleted family by family; resumable). APPS=VGG16,ResNet50 for some.
.PHONY: check-keras-apps
check-keras-apps: build
	python3 tests/fixtures/check_keras_apps.py $(if $(APPS),--families $(APPS)) $(APPS_FLAGS)
