/* The copy rate a rank gets while the other ranks of a run copy too: the denominator of the
 * memory-bandwidth bound in perf/peers/intra_node.sh.
 *   memcpy_bw BYTES START_NS SECONDS
 * Allocates and touches a BYTES source and destination, sleeps until CLOCK_REALTIME START_NS
 * (every process of the run is given the same one), then memcpy's the source into the
 * destination until SECONDS have passed. Prints one line: "<bytes> <GB/s copied>" (each copied
 * byte is one byte read and one written). Started N times at once, the N rates are what N ranks
 * on this machine's cores and memory system can copy side by side. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s BYTES START_NS SECONDS\n", argv[0]);
    return 2;
  }
  const size_t bytes = strtoull(argv[1], NULL, 10);
  const long long start_ns = strtoll(argv[2], NULL, 10);
  const double seconds = atof(argv[3]);
  char* src = malloc(bytes);
  char* dst = malloc(bytes);
  if (bytes == 0 || !src || !dst || seconds <= 0) {
    fprintf(stderr, "memcpy_bw: need BYTES > 0 that can be allocated twice and SECONDS > 0\n");
    return 2;
  }
  memset(src, 1, bytes);
  memset(dst, 2, bytes);
  const struct timespec start = {start_ns / 1000000000LL, start_ns % 1000000000LL};
  clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &start, NULL);
  size_t copies = 0;
  const double t0 = now_s();
  double t = t0;
  do {
    memcpy(dst, src, bytes);
    src[copies % bytes] ^= dst[bytes - 1];  // the next copy is not the same as this one
    ++copies;
    t = now_s();
  } while (t - t0 < seconds);
  printf("%zu %.3f\n", bytes, (double)copies * (double)bytes / (t - t0) / 1e9);
  free(src);
  free(dst);
  return 0;
}
