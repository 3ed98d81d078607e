! MPI receiving straight into protected memory from Fortran (tests/mpi/run.sh runs it on 2
! ranks with ICKPT_BACKEND=mprotect; MPICH's bindings reach libickpt_mpi's wrappers by their
! MPI_ names, Open MPI's by their PMPI_ names): after checkpoint 1 each rank MPI_Recvs 1 MiB
! from the other into a clean protected array, and an MPI_Allreduce writes another; an
! MPI_Irecv stays pending across checkpoint 2; after checkpoint 3 every element is checked,
! and a restart (argument "restart") restores tag 3 into scribbled arrays and checks them
! again. Usage: recv_protected_f run|restart
program recv_protected_f
  use, intrinsic :: iso_c_binding
  use mpi
  use ickpt_mpi
  implicit none
  integer, parameter :: n = 131072 ! 1 MiB of doubles
  real(c_double), allocatable, target :: a(:), c(:), f(:)
  real(c_double), allocatable :: out(:), mine(:)
  integer :: rank, nranks, peer, ierr, turn, req, i
  integer :: st(MPI_STATUS_SIZE)
  integer(c_int64_t) :: global, tag
  integer(c_int) :: r
  character(len=16) :: mode

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  if (nranks /= 2) error stop "recv_protected_f: run it on 2 ranks"
  call get_command_argument(1, mode)
  peer = 1 - rank
  allocate(a(n), c(n), f(n), out(n), mine(n))
  if (ickpt_mpi_init(MPI_COMM_WORLD) /= ICKPT_OK) error stop ickpt_mpi_error()
  if (ickpt_protect(1_c_int64_t, c_loc(a), c_sizeof(a(1)) * size(a, kind=c_size_t)) /= ICKPT_OK) &
       error stop ickpt_error()
  if (ickpt_protect(2_c_int64_t, c_loc(c), c_sizeof(c(1)) * size(c, kind=c_size_t)) /= ICKPT_OK) &
       error stop ickpt_error()
  if (ickpt_protect(3_c_int64_t, c_loc(f), c_sizeof(f(1)) * size(f, kind=c_size_t)) /= ICKPT_OK) &
       error stop ickpt_error()

  if (trim(mode) == "run") then
     r = ickpt_mpi_restore_latest(global, tag)
     if (r /= ICKPT_ERR_NOT_FOUND) error stop "recv_protected_f: a first run found a version"
     a = -1.0_c_double
     c = -1.0_c_double
     f = -1.0_c_double
     if (ickpt_mpi_checkpoint(1_c_int64_t) /= ICKPT_OK) error stop ickpt_mpi_error()
     do i = 1, n
        out(i) = value(1, rank, i)
     end do
     do turn = 0, 1
        if (rank == turn) then
           call MPI_Recv(a, n, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, st, ierr)
        else
           call MPI_Send(out, n, MPI_DOUBLE_PRECISION, peer, 1, MPI_COMM_WORLD, ierr)
        end if
        if (ierr /= MPI_SUCCESS) error stop "recv_protected_f: MPI_Recv/MPI_Send failed"
     end do
     do i = 1, n
        mine(i) = value(2, rank, i)
     end do
     call MPI_Allreduce(mine, c, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
     call MPI_Irecv(f, n, MPI_DOUBLE_PRECISION, peer, 3, MPI_COMM_WORLD, req, ierr)
     if (ickpt_mpi_checkpoint(2_c_int64_t) /= ICKPT_OK) error stop ickpt_mpi_error()
     do i = 1, n
        out(i) = value(3, rank, i)
     end do
     call MPI_Send(out, n, MPI_DOUBLE_PRECISION, peer, 3, MPI_COMM_WORLD, ierr)
     call MPI_Wait(req, st, ierr)
     if (ickpt_mpi_checkpoint(3_c_int64_t) /= ICKPT_OK) error stop ickpt_mpi_error()
  else
     a = 0.5_c_double
     c = 0.5_c_double
     f = 0.5_c_double
     if (ickpt_mpi_restore_latest(global, tag) /= ICKPT_OK) error stop ickpt_mpi_error()
     if (tag /= 3) error stop "recv_protected_f: the restart restored another tag than 3"
  end if
  do i = 1, n
     if (a(i) /= value(1, peer, i)) error stop "recv_protected_f: MPI_Recv: wrong element"
     if (c(i) /= value(2, 0, i) + value(2, 1, i)) error stop "recv_protected_f: MPI_Allreduce: wrong element"
     if (f(i) /= value(3, peer, i)) error stop "recv_protected_f: MPI_Irecv: wrong element"
  end do
  if (ickpt_mpi_finalize() /= ICKPT_OK) error stop ickpt_mpi_error()
  if (rank == 0) print '(a, a, a)', "recv_protected_f: ", trim(mode), ": ok"
  call MPI_Finalize(ierr)
contains
  ! What rank `from` sends in exchange `k`, element i (integers, so sums are exact).
  real(c_double) function value(k, from, i)
    integer, intent(in) :: k, from, i
    value = real(mod(i * 7 + k * 1000 + from * 100003, 65536), c_double)
  end function value
end program recv_protected_f
