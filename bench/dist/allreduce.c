/* allreduce.c — the all-reduce alone, between the processes of mpirun on this machine:
 * MPI_Allreduce (sum, in place) of the gradient sizes of workload A (34,826 floats),
 * workload B (288,746) and 4,194,304 floats, REPS times each after a barrier; prints the
 * median and minimum microseconds per size (rank 0). Built and run by bench/dist/run.sh:
 *   mpicc -O2 bench/dist/allreduce.c -o allreduce && mpirun -np 2 ./allreduce */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define REPS 60

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int sizes[] = {34826, 288746, 4194304};
    for (int s = 0; s < 3; s++) {
        float *buf = calloc((size_t)sizes[s], sizeof(float));
        double t[REPS];
        if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
        for (int r = 0; r < REPS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, buf, sizes[s], MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            t[r] = (MPI_Wtime() - t0) * 1e6;
        }
        qsort(t, REPS, sizeof t[0], cmp);
        if (rank == 0)
            printf("allreduce %d floats (%.2f MB): median %.0f us, min %.0f us\n", sizes[s], sizes[s] * 4 / 1e6,
                   t[REPS / 2], t[0]);
        free(buf);
    }
    MPI_Finalize();
    return 0;
}
