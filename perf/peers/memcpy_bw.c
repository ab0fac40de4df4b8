/* The copy rate a rank gets while the other ranks of a run copy too: the denominator of the
 * memory-bandwidth bound in perf/peers/intra_node.sh.
 *   memcpy_bw BYTES START_NS SECONDS
 * Allocates and touches a BYTES source and destination, then copies the source into the
 * destination for SECONDS twice: with memcpy from CLOCK_REALTIME START_NS, and with streaming
 * (non-temporal) stores SECONDS + 0.2 s later (every process of a run is given the same
 * START_NS, so the processes copy side by side). Prints one line: "<bytes> <memcpy GB/s>
 * <streaming GB/s>" (bytes copied per second: each is one byte read and one written). The
 * better of the two is what a rank on this machine's cores and memory system can copy while
 * the others copy too. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Streaming stores, whole 64-byte lines; the rest (and non-x86 machines) with memcpy. */
static void stream_copy(char* dst, const char* src, size_t bytes) {
  size_t done = 0;
#if defined(__x86_64__)
  for (; done + 64 <= bytes; done += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(src + done));
    __m128i b = _mm_loadu_si128((const __m128i*)(src + done + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(src + done + 32));
    __m128i d = _mm_loadu_si128((const __m128i*)(src + done + 48));
    _mm_stream_si128((__m128i*)(dst + done), a);
    _mm_stream_si128((__m128i*)(dst + done + 16), b);
    _mm_stream_si128((__m128i*)(dst + done + 32), c);
    _mm_stream_si128((__m128i*)(dst + done + 48), d);
  }
  _mm_sfence();
#endif
  memcpy(dst + done, src + done, bytes - done);
}

/* Sleeps until CLOCK_REALTIME at_ns, copies for `seconds`; returns GB/s copied. */
static double rate(char* dst, char* src, size_t bytes, long long at_ns, double seconds,
                   int streaming) {
  const struct timespec at = {at_ns / 1000000000LL, at_ns % 1000000000LL};
  clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL);
  size_t copies = 0;
  const double t0 = now_s();
  double t = t0;
  do {
    if (streaming)
      stream_copy(dst, src, bytes);
    else
      memcpy(dst, src, bytes);
    src[copies % bytes] ^= dst[bytes - 1];  /* the next copy is not the same as this one */
    ++copies;
    t = now_s();
  } while (t - t0 < seconds);
  return (double)copies * (double)bytes / (t - t0) / 1e9;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s BYTES START_NS SECONDS\n", argv[0]);
    return 2;
  }
  const size_t bytes = strtoull(argv[1], NULL, 10);
  const long long start_ns = strtoll(argv[2], NULL, 10);
  const double seconds = atof(argv[3]);
  char* src = aligned_alloc(64, (bytes + 63) / 64 * 64);
  char* dst = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (bytes == 0 || !src || !dst || seconds <= 0) {
    fprintf(stderr, "memcpy_bw: need BYTES > 0 that can be allocated twice and SECONDS > 0\n");
    return 2;
  }
  memset(src, 1, bytes);
  memset(dst, 2, bytes);
  const double plain = rate(dst, src, bytes, start_ns, seconds, 0);
  const double streamed =
      rate(dst, src, bytes, start_ns + (long long)((seconds + 0.2) * 1e9), seconds, 1);
  printf("%zu %.3f %.3f\n", bytes, plain, streamed);
  free(src);
  free(dst);
  return 0;
}
