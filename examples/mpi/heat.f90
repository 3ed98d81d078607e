! 1-D heat diffusion over MPI ranks in Fortran: heat.f90 is the original, heat_ickpt.f90 the
! same code with coordinated checkpoints (`use ickpt_mpi`); `diff heat.f90 heat_ickpt.f90`
! is the whole cost of adoption. The C pair (heat.c, heat_ickpt.c) computes the same rod and
! prints the same checksum.
!
! In this directory, with ickpt installed and PKG_CONFIG_PATH naming its pkgconfig directory:
!   mpif90 -O2 heat.f90 -o heat_f && mpirun --oversubscribe -np 4 ./heat_f [STEPS [CELLS]]
!   mpif90 -O2 heat_ickpt.f90 -o heat_ickpt_f $(pkg-config --cflags --libs ickpt-mpi-fortran)
!   ICKPT_DIR=$HOME/heat-job-f mpirun --oversubscribe -np 4 ./heat_ickpt_f [STEPS [CELLS [EVERY]]]
!
! The arrays are allocatable with `target`, so their addresses can be given to ickpt.
program heat
  use, intrinsic :: iso_c_binding
  use mpi
  implicit none
  real(c_double), allocatable, target :: a(:), b(:)
  real(c_double) :: from_left, from_right, local, total
  integer :: rank, nranks, ierr, left, right
  integer(c_long) :: steps, cells, it, i
  character(len=32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  steps = 2000
  cells = 1000000
  if (command_argument_count() >= 1) then
     call get_command_argument(1, arg)
     read (arg, *) steps
  end if
  if (command_argument_count() >= 2) then
     call get_command_argument(2, arg)
     read (arg, *) cells
  end if
  allocate(a(0:cells + 1), b(0:cells + 1))
  a = 0.0_c_double
  b = 0.0_c_double
  if (rank == 0) b(1:cells / 10) = 100.0_c_double
  left = merge(rank - 1, MPI_PROC_NULL, rank > 0)
  right = merge(rank + 1, MPI_PROC_NULL, rank < nranks - 1)
  it = 0
  do while (it < steps)
     if (mod(it, 2_c_long) == 0) then
        call step(b, a)
     else
        call step(a, b)
     end if
     it = it + 1
  end do
  local = 0.0_c_double
  do i = 1, cells
     if (mod(it, 2_c_long) == 0) then
        local = local + b(i) * real(mod(i + rank * cells, 1000_c_long) + 1, c_double)
     else
        local = local + a(i) * real(mod(i + rank * cells, 1000_c_long) + 1, c_double)
     end if
  end do
  call MPI_Reduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) write (*, '(a, i0, a, i0, a, i0, a, es25.17)') 'heat: ', nranks, ' ranks, ', &
       cells, ' cells each, ', steps, ' steps, checksum ', total
  call MPI_Finalize(ierr)

contains

  ! One step from u into v; halo cells are received into scalars, then stored.
  subroutine step(u, v)
    real(c_double), intent(inout) :: u(0:), v(0:)
    integer(c_long) :: j
    from_left = 0.0_c_double
    from_right = 0.0_c_double
    call MPI_Sendrecv(u(1), 1, MPI_DOUBLE_PRECISION, left, 0, from_right, 1, &
         MPI_DOUBLE_PRECISION, right, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_Sendrecv(u(cells), 1, MPI_DOUBLE_PRECISION, right, 1, from_left, 1, &
         MPI_DOUBLE_PRECISION, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    u(0) = from_left
    u(cells + 1) = from_right
    do j = 1, cells
       v(j) = u(j) + 0.25_c_double * (u(j - 1) - 2.0_c_double * u(j) + u(j + 1))
    end do
  end subroutine step
end program heat
