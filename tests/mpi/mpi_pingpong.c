/* A ping-pong between ranks 0 and 1 (tests/e2e/test_openmpi.sh builds it with mpicc and runs it
 * under `softrdma run -- mpirun`): for each size from 8 B to 2 MiB (steps of 4x), rank 0 sends a
 * message that rank 1 returns; every byte of every returned message is checked (a pattern depending
 * on size, iteration and byte position). Rank 0 prints one line per size: size, iterations, half
 * round-trip latency (us) and bandwidth (MB/s), then "pingpong: OK" or the first mismatch.
 * Exit status 0 only if all was correct. Usage: mpi_pingpong [iterations per size] */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pattern(size_t size, int iter, size_t i)
{
	return (unsigned char)(i * 31u + (size_t)iter * 7u + size);
}

int main(int argc, char **argv)
{
	int rank, nranks, bad = 0;
	int iters = argc > 1 ? atoi(argv[1]) : 200;
	const size_t max = 2 << 20;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2 || iters < 1) {
		if (rank == 0)
			fprintf(stderr,
				"mpi_pingpong: needs exactly 2 ranks and iterations >= 1\n");
		MPI_Finalize();
		return 2;
	}
	unsigned char *out = malloc(max), *in = malloc(max);
	if (!out || !in)
		MPI_Abort(MPI_COMM_WORLD, 1);
	if (rank == 0)
		printf("%10s %8s %14s %14s\n", "bytes", "iters", "latency[us]", "bw[MB/s]");
	for (size_t size = 8; size <= max && !bad; size *= 4) {
		int n = size >= (256 << 10) ? (iters + 9) / 10 : iters;
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int it = 0; it < n && !bad; it++) {
			if (rank == 0) {
				for (size_t i = 0; i < size; i++)
					out[i] = pattern(size, it, i);
				memset(in, 0, size);
				MPI_Send(out, (int)size, MPI_BYTE, 1, it, MPI_COMM_WORLD);
				MPI_Recv(in, (int)size, MPI_BYTE, 1, it, MPI_COMM_WORLD,
					 MPI_STATUS_IGNORE);
				for (size_t i = 0; i < size; i++) {
					if (in[i] != pattern(size, it, i)) {
						printf("pingpong: MISMATCH at %zu B, iteration %d, "
						       "byte "
						       "%zu: %u, not %u\n",
						       size, it, i, in[i], pattern(size, it, i));
						bad = 1;
						break;
					}
				}
			} else {
				MPI_Status st;
				int count;
				MPI_Recv(in, (int)size, MPI_BYTE, 0, it, MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_BYTE, &count);
				if ((size_t)count != size)
					bad = 1;
				MPI_Send(in, (int)size, MPI_BYTE, 0, it, MPI_COMM_WORLD);
			}
		}
		double dt = MPI_Wtime() - t0;
		MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
		if (rank == 0 && !bad)
			printf("%10zu %8d %14.2f %14.2f\n", size, n, dt / n / 2 * 1e6,
			       2.0 * (double)size * n / dt / 1e6);
	}
	if (rank == 0)
		printf("pingpong: %s\n", bad ? "FAILED" : "OK");
	free(out);
	free(in);
	MPI_Finalize();
	return bad;
}
