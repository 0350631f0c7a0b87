/* SPDX-License-Identifier: Apache-2.0 */
/*
 * passthrough — every CUDA driver symbol the interposer does not hook (passthrough.h), exported as a
 * two-instruction trampoline: `jmp *slot`. A slot starts out pointing at a per-symbol lazy stub that
 * saves the argument registers, resolves the real function from the real driver (initialising the
 * interposer on first use), patches the slot and jumps on, so later calls cost one indirect jump.
 *
 * The trampolines are assembly because they must forward any prototype untouched; they exist so that a
 * program linked against libcuda.so.1, or dlsym-ing any driver symbol from it, finds every symbol here.
 * Never calls a NULL pointer: a symbol the real driver lacks resolves to a function returning
 * CUDA_ERROR_NOT_FOUND.
 */
#include "interposer/compat.h" /* first: the glibc floor */
#include <dlfcn.h>
#include <stdint.h>

#include "interposer/interposer.h"
#include "interposer/passthrough.h"

#if !defined(__x86_64__)
#error "passthrough trampolines are written for x86_64 only; port the two asm blocks below"
#endif

struct gs_pass {
        void *fn;         /* where the exported symbol jumps (lazy stub until resolved) */
        const char *name; /* the driver symbol */
};

/* Called from the asm entry with the slot in %rdi; returns the function to jump to. */
void *gs_pass_resolve(struct gs_pass *p) __attribute__((visibility("hidden"), used));

static int gs_pass_missing(void) {
        return gs_fail_code(); /* CUDA_ERROR_NOT_FOUND: no such symbol in the driver; or failed closed */
}

void *gs_pass_resolve(struct gs_pass *p) {
        void *fn = gs_real_symbol(p->name);
        if (!fn)
                fn = (void *)gs_pass_missing;
        __atomic_store_n(&p->fn, fn, __ATOMIC_RELEASE);
        return fn;
}

#define GS_PASS_DECL(name)                                                  \
        extern char gs_lazy_##name[] __attribute__((visibility("hidden"))); \
        __attribute__((visibility("hidden"))) struct gs_pass gs_pass_##name = { gs_lazy_##name, #name };
GS_PASSTHROUGH(GS_PASS_DECL)

#define GS_PASS_ASM(name)                                \
        __asm__(".pushsection .text\n"                   \
                ".globl " #name "\n"                     \
                ".type " #name ",@function\n"            \
                ".p2align 4\n" #name ":\n"               \
                "\tendbr64\n"                            \
                "\tjmp *gs_pass_" #name "(%rip)\n"       \
                ".size " #name ", .-" #name "\n"         \
                ".globl gs_lazy_" #name "\n"             \
                ".hidden gs_lazy_" #name "\n"            \
                ".type gs_lazy_" #name ",@function\n"    \
                "gs_lazy_" #name ":\n"                   \
                "\tendbr64\n"                            \
                "\tleaq gs_pass_" #name "(%rip), %r11\n" \
                "\tjmp gs_pass_entry\n"                  \
                ".popsection\n");
GS_PASSTHROUGH(GS_PASS_ASM)

/* Save every register a SysV x86_64 call may pass arguments in (rdi rsi rdx rcx r8 r9, rax for varargs,
 * xmm0-7), call the resolver, restore, and tail-jump to the real function. */
__asm__(".pushsection .text\n"
        ".hidden gs_pass_entry\n"
        ".type gs_pass_entry,@function\n"
        ".p2align 4\n"
        "gs_pass_entry:\n"
        "\tpushq %rbp\n"
        "\tmovq %rsp, %rbp\n"
        "\tpushq %rdi\n\tpushq %rsi\n\tpushq %rdx\n\tpushq %rcx\n"
        "\tpushq %r8\n\tpushq %r9\n\tpushq %rax\n\tpushq %rax\n"
        "\tsubq $128, %rsp\n"
        "\tmovdqu %xmm0, 0(%rsp)\n\tmovdqu %xmm1, 16(%rsp)\n\tmovdqu %xmm2, 32(%rsp)\n\tmovdqu %xmm3, 48(%rsp)\n"
        "\tmovdqu %xmm4, 64(%rsp)\n\tmovdqu %xmm5, 80(%rsp)\n\tmovdqu %xmm6, 96(%rsp)\n\tmovdqu %xmm7, 112(%rsp)\n"
        "\tmovq %r11, %rdi\n"
        "\tcall gs_pass_resolve\n"
        "\tmovq %rax, %r10\n"
        "\tmovdqu 0(%rsp), %xmm0\n\tmovdqu 16(%rsp), %xmm1\n\tmovdqu 32(%rsp), %xmm2\n\tmovdqu 48(%rsp), %xmm3\n"
        "\tmovdqu 64(%rsp), %xmm4\n\tmovdqu 80(%rsp), %xmm5\n\tmovdqu 96(%rsp), %xmm6\n\tmovdqu 112(%rsp), %xmm7\n"
        "\taddq $128, %rsp\n"
        "\tpopq %rax\n\tpopq %rax\n\tpopq %r9\n\tpopq %r8\n"
        "\tpopq %rcx\n\tpopq %rdx\n\tpopq %rsi\n\tpopq %rdi\n"
        "\tpopq %rbp\n"
        "\tjmp *%r10\n"
        ".size gs_pass_entry, .-gs_pass_entry\n"
        ".popsection\n");
