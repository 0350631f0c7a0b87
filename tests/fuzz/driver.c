/* SPDX-License-Identifier: Apache-2.0 */
/* Replays every file given (or every file in a given directory) through LLVMFuzzerTestOneInput,
 * for builds without libFuzzer. Exit 0 when all inputs ran. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "util/util.h"

static int run_file(const char *path) {
        _cleanup_(freep) char *buf = NULL;
        size_t len;
        int r = read_file(path, 16 << 20, &buf, &len);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return r;
        }
        LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
        return 0;
}

int main(int argc, char **argv) {
        unsigned n = 0;
        for (int i = 1; i < argc; i++) {
                struct stat st;
                if (stat(argv[i], &st) < 0) {
                        perror(argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        if (run_file(argv[i]) < 0)
                                return 1;
                        n++;
                        continue;
                }
                DIR *d = opendir(argv[i]);
                if (!d)
                        return 1;
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char p[4096];
                        snprintf(p, sizeof p, "%s/%s", argv[i], de->d_name);
                        if (run_file(p) < 0) {
                                closedir(d);
                                return 1;
                        }
                        n++;
                }
                closedir(d);
        }
        printf("replayed %u inputs\n", n);
        return n ? 0 : 1;
}
