/* README.md's snippet as a whole program: every rank contributes a shard of bfloat16 values and
 * all-gathers the full vector.
 *
 *   tools/zcollrun -n 4 --nodes 2 build/examples/zcoll_example_allgather
 *
 * Exit code 0 when every element is what its rank sent; 1 on a wrong value, 2 when a call fails. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zcoll/zcoll.h>

/* bfloat16 is the top half of a float32. Exact for the small integers used here (<= 256). */
static uint16_t toBfloat16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16);
}

#define CHECK(call)                                                                  \
  do {                                                                               \
    zcollResult_t r_ = (call);                                                       \
    if (r_ != zcollSuccess) {                                                        \
      fprintf(stderr, "%s failed: %s: %s\n", #call, zcollGetErrorString(r_),         \
              zcollGetLastError(comm));                                              \
      return 2;                                                                      \
    }                                                                                \
  } while (0)

int main(void) {
  enum { count = 32 }; /* elements per rank */
  zcollComm_t comm = NULL;
  int rank = 0, nranks = 0;
  CHECK(zcollCommInitFromEnv(&comm, NULL)); /* RANK/WORLD_SIZE + ZCOLL_COMM_ID, torchrun, mpirun, srun */
  CHECK(zcollCommUserRank(comm, &rank));
  CHECK(zcollCommCount(comm, &nranks));

  uint16_t shard[count];
  uint16_t* full = malloc(sizeof(uint16_t) * count * (size_t)nranks);
  if (full == NULL) return 2;
  for (int i = 0; i < count; ++i) shard[i] = toBfloat16((float)(rank * count + i));

  CHECK(zcollAllGather(shard, full, count, zcollBfloat16, comm, NULL));

  int wrong = 0;
  for (int i = 0; i < count * nranks; ++i)
    if (full[i] != toBfloat16((float)i)) ++wrong;
  printf("rank %d of %d: all-gathered %d bfloat16 values, %d wrong\n", rank, nranks,
         count * nranks, wrong);
  free(full);
  if (zcollCommDestroy(comm) != zcollSuccess) return 2;
  return wrong == 0 ? 0 : 1;
}
