/* An MPI program that prints its rank and the size of MPI_COMM_WORLD, after a
 * barrier, so that every task took part in the exchange. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
