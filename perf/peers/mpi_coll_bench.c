/* The same measurement as zcoll's all_gather_perf / reduce_scatter_perf, over Open MPI, so
 * perf/peers/compare.sh can put both side by side from one run.
 *   mpi_coll_bench allgather|reduce_scatter|allreduce BYTES_PER_RANK ITERS WARMUP [inplace]
 * Prints one line: "<coll> <bytes per rank> <time us> <busbw GB/s>" (rank 0). Float sum. Sizes and
 * bus bandwidth follow nccl-tests: all-gather and reduce-scatter size = W * bytes per rank,
 * busbw = size/time * (W-1)/W; all-reduce size = bytes per rank, busbw = size/time * 2(W-1)/W.
 * `inplace`: MPI_IN_PLACE (the rank's piece already in the big buffer / reduced in place). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, w;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  if (argc != 5 && argc != 6) {
    if (rank == 0)
      fprintf(stderr, "usage: %s allgather|reduce_scatter|allreduce BYTES ITERS WARMUP [inplace]\n",
              argv[0]);
    MPI_Finalize();
    return 2;
  }
  const int allgather = strcmp(argv[1], "allgather") == 0;
  const int allreduce = strcmp(argv[1], "allreduce") == 0;
  const int inplace = argc == 6 && strcmp(argv[5], "inplace") == 0;
  const size_t count = strtoull(argv[2], NULL, 10) / sizeof(float);
  const int iters = atoi(argv[3]), warmup = atoi(argv[4]);
  float* small = malloc(count * sizeof(float));
  float* big = malloc(count * w * sizeof(float));
  for (size_t i = 0; i < count; ++i) small[i] = (float)rank;
  for (size_t i = 0; i < count * w; ++i) big[i] = (float)rank;
  double start = 0;
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) {
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (allgather)
      MPI_Allgather(inplace ? MPI_IN_PLACE : small, (int)count, MPI_FLOAT, big, (int)count,
                    MPI_FLOAT, MPI_COMM_WORLD);
    else if (allreduce)
      MPI_Allreduce(inplace ? MPI_IN_PLACE : small, inplace ? small : big, (int)count, MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
    else
      MPI_Reduce_scatter_block(inplace ? MPI_IN_PLACE : big, inplace ? big : small, (int)count,
                               MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  double t = (MPI_Wtime() - start) / iters, tmax = 0;
  MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    double size = (double)count * sizeof(float) * (allreduce ? 1 : w);
    double factor = allreduce ? 2.0 * (w - 1) / w : (double)(w - 1) / w;
    printf("%s %zu %.1f %.2f\n", argv[1], count * sizeof(float), tmax * 1e6,
           size / tmax / 1e9 * factor);
  }
  free(small);
  free(big);
  MPI_Finalize();
  return 0;
}
