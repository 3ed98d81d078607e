! ickpt_mpi for Fortran: `use ickpt_mpi` gives the coordinated calls of ickpt_mpi.h (and,
! through it, everything of `use ickpt`). The communicator is an ordinary Fortran MPI handle
! (MPI_COMM_WORLD from `use mpi` or mpif.h; comm%MPI_VAL from `use mpi_f08`). Installed by
! `make install` beside ickpt.mod; link with `pkg-config --libs ickpt-mpi-fortran`.
!
!   call MPI_Init(ierr)
!   if (ickpt_mpi_init(MPI_COMM_WORLD) /= ICKPT_OK) error stop ickpt_mpi_error()
!   if (ickpt_protect(1_c_int64_t, c_loc(u), c_sizeof(u(1)) * size(u, kind=c_size_t)) /= ICKPT_OK) error stop ickpt_error()
!   r = ickpt_mpi_restore_latest(global, tag)
!   if (r == ICKPT_OK) it = int(tag)
!   ...
!   if (ickpt_mpi_checkpoint(int(it, c_int64_t)) /= ICKPT_OK) error stop ickpt_mpi_error()
!   ...
!   if (ickpt_mpi_finalize() /= ICKPT_OK) error stop ickpt_mpi_error()
module ickpt_mpi
  use, intrinsic :: iso_c_binding
  use ickpt
  implicit none

  interface
     integer(c_int) function ickpt_mpi_init_f(comm, cfg) bind(C, name="ickpt_mpi_init_f")
       import :: c_int, ickpt_config
       integer(c_int), value :: comm
       type(ickpt_config), intent(in) :: cfg
     end function ickpt_mpi_init_f
     integer(c_int) function ickpt_mpi_restore_latest(global, tag) &
          bind(C, name="ickpt_mpi_restore_latest")
       import :: c_int, c_int64_t
       integer(c_int64_t), intent(out) :: global, tag
     end function ickpt_mpi_restore_latest
     integer(c_int) function ickpt_mpi_checkpoint(tag) bind(C, name="ickpt_mpi_checkpoint")
       import :: c_int, c_int64_t
       integer(c_int64_t), value :: tag
     end function ickpt_mpi_checkpoint
     integer(c_int) function ickpt_mpi_wait() bind(C, name="ickpt_mpi_wait")
       import :: c_int
     end function ickpt_mpi_wait
     integer(c_int) function ickpt_mpi_finalize() bind(C, name="ickpt_mpi_finalize")
       import :: c_int
     end function ickpt_mpi_finalize
     integer(c_int) function ickpt_mpi_global(global, version) bind(C, name="ickpt_mpi_global")
       import :: c_int, c_int64_t
       integer(c_int64_t), intent(out) :: global, version
     end function ickpt_mpi_global
     ! COLLECTIVE. CAPE's parallel loop: every rank's section delta injected on every rank
     ! (docs/sections.md); pass c_null_ptr for info.
     integer(c_int) function ickpt_mpi_section_exchange(info) &
          bind(C, name="ickpt_mpi_section_exchange")
       import :: c_int, c_ptr
       type(c_ptr), value :: info
     end function ickpt_mpi_section_exchange
     type(c_ptr) function ickpt_mpi_last_error_c() bind(C, name="ickpt_mpi_last_error")
       import :: c_ptr
     end function ickpt_mpi_last_error_c
  end interface

contains

  ! COLLECTIVE. ickpt_mpi_init on the Fortran communicator `comm`; without `cfg`, the
  ! defaults (the job directory from ICKPT_DIR).
  integer(c_int) function ickpt_mpi_init(comm, cfg)
    integer, intent(in) :: comm
    type(ickpt_config), intent(in), optional :: cfg
    type(ickpt_config) :: defaults
    if (present(cfg)) then
       ickpt_mpi_init = ickpt_mpi_init_f(int(comm, c_int), cfg)
    else
       call ickpt_config_defaults(defaults)
       ickpt_mpi_init = ickpt_mpi_init_f(int(comm, c_int), defaults)
    end if
  end function ickpt_mpi_init

  ! The message of the last failed ickpt_mpi call on this rank.
  function ickpt_mpi_error() result(s)
    character(len=:), allocatable :: s
    s = from_c(ickpt_mpi_last_error_c())
  end function ickpt_mpi_error
end module ickpt_mpi
