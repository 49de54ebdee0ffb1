#!/bin/sh
# Prints "yes" when this machine executes AVX-512 (F, BW, VL, DQ) instructions: a tiny program compiled with them runs
# and computes the right sum. /proc/cpuinfo alone can list what a virtual machine refuses (SIGILL). Used by the
# Makefile to choose llama-cpp-python's build flags; prints nothing otherwise (no compiler, no AVX-512, a crash).
dir=$(mktemp -d) || exit 0
trap 'rm -rf "$dir"' EXIT
cat > "$dir/p.c" <<'C'
#include <immintrin.h>
int main(void) {
    __m512i a = _mm512_set1_epi32(3);
    __m512i b = _mm512_mask_add_epi32(a, (__mmask16)0xFFFF, a, a);   /* F */
    __m256i c = _mm256_mask_add_epi32(_mm512_castsi512_si256(b), (__mmask8)0xFF, _mm512_castsi512_si256(b), _mm512_castsi512_si256(b)); /* VL */
    __m512i d = _mm512_abs_epi8(_mm512_set1_epi8(-1));                 /* BW */
    __m512d e = _mm512_and_pd(_mm512_set1_pd(1.0), _mm512_set1_pd(1.0)); /* DQ */
    return !(_mm512_reduce_add_epi32(b) == 96 && _mm256_extract_epi32(c, 0) == 12 && _mm512_reduce_add_epi32(d) == 16 * 0x01010101
             && _mm512_reduce_add_pd(e) == 8.0);
}
C
${CC:-cc} -O0 -mavx512f -mavx512bw -mavx512vl -mavx512dq "$dir/p.c" -o "$dir/p" 2>/dev/null && ("$dir/p") 2>/dev/null && echo yes
exit 0
