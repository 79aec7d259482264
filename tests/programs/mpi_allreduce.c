/* An MPI program that sums rank+1 over MPI_COMM_WORLD with MPI_Allreduce and
 * checks the result on every rank: prints "allreduce rank R of S sum X ok" and
 * exits 0, or says what it expected and exits 1. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size;
    long mine, sum = 0, want;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mine = rank + 1;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    want = (long)size * (size + 1) / 2;
    if (sum != want) {
        fprintf(stderr, "allreduce rank %d of %d: sum %ld, expected %ld\n",
                rank, size, sum, want);
        MPI_Finalize();
        return 1;
    }
    printf("allreduce rank %d of %d sum %ld ok\n", rank, size, sum);
    MPI_Finalize();
    return 0;
}
