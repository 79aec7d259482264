/* An MPI program one of whose tasks exits with status 3 before MPI_Init: the
 * task whose PMI_RANK is argv[1] (default 1).  The others call MPI_Init, which
 * can never complete its exchange without it; they must be told, not hang. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    const char *pmi_rank = getenv("PMI_RANK");
    int early = argc > 1 ? atoi(argv[1]) : 1;
    int rank, size;
    if (pmi_rank != NULL && atoi(pmi_rank) == early)
        exit(3);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d of %d\n", rank, size);
    MPI_Finalize();
    return 0;
}
