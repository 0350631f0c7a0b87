/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz — what every fuzz target shares: the libFuzzer entry point and CHECK, the assertion that
 * stays on in every build type (the normal build defines NDEBUG, which would silence assert()).
 * A target is built two ways (tests/fuzz/CMakeLists.txt): with libFuzzer in the clang build, and
 * with driver.c, which replays the seed corpus, in the gcc build.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Abort (a finding) when X is false; X is evaluated in every build. */
#define CHECK(x)                 \
        do {                     \
                if (!(x))        \
                        abort(); \
        } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
