! ickpt for Fortran: `use ickpt` gives the serial C API of ickpt.h through ISO_C_BINDING, and
! a few helpers that take Fortran strings and arrays. Installed by `make install` (ickpt.mod
! in include/, libickpt_fortran.so in lib/; `pkg-config --cflags --libs ickpt-fortran`).
!
!   use ickpt
!   real(c_double), allocatable, target :: u(:)
!   type(ickpt_config) :: cfg
!   integer(c_int64_t) :: version, tag
!   call ickpt_config_defaults(cfg)
!   call ickpt_set_dir(cfg, "/scratch/job")
!   if (ickpt_init(cfg) /= ICKPT_OK) error stop ickpt_error()
!   allocate(u(n))
!   if (ickpt_protect(1_c_int64_t, c_loc(u), c_sizeof(u(1)) * size(u, kind=c_size_t)) /= ICKPT_OK) error stop ickpt_error()
!   if (ickpt_restore_latest_tagged(version, tag) == ICKPT_OK) it = tag
!   ...
!   if (ickpt_checkpoint_tagged(int(it, c_int64_t), c_null_ptr) /= ICKPT_OK) print *, ickpt_error()
module ickpt
  use, intrinsic :: iso_c_binding
  implicit none
  private :: dir_buffer, shared_dir_buffer, keep_c_string

  ! Result codes (ickpt_result in ickpt.h).
  integer(c_int), parameter :: ICKPT_OK = 0, ICKPT_ERR_INVALID_ARGUMENT = 1, &
       ICKPT_ERR_NOT_INITIALIZED = 2, ICKPT_ERR_ALREADY_INITIALIZED = 3, &
       ICKPT_ERR_UNKNOWN_REGION = 4, ICKPT_ERR_REGION_EXISTS = 5, &
       ICKPT_ERR_REGION_MISMATCH = 6, ICKPT_ERR_NOT_FOUND = 7, ICKPT_ERR_CORRUPT = 8, &
       ICKPT_ERR_IO = 9, ICKPT_ERR_NO_SPACE = 10, ICKPT_ERR_NOT_A_STORE = 11, &
       ICKPT_ERR_STORE_LOCKED = 12, ICKPT_ERR_TRACKING = 13, ICKPT_ERR_INTERNAL = 14, &
       ICKPT_ERR_COLLECTIVE = 15, ICKPT_ERR_SECTION = 16
  integer(c_int32_t), parameter :: ICKPT_BACKEND_AUTO = 0, ICKPT_BACKEND_MPROTECT = 1, &
       ICKPT_BACKEND_UFFD = 2, ICKPT_BACKEND_UFFD_ASYNC = 3
  integer(c_int32_t), parameter :: ICKPT_MODE_SYNC = 0, ICKPT_MODE_ASYNC = 1
  integer(c_int32_t), parameter :: ICKPT_POLICY_FIXED = 0, ICKPT_POLICY_COST = 1

  integer(c_int32_t), parameter :: ICKPT_COMPRESS_DEFAULT = 0, ICKPT_COMPRESS_OFF = 1, &
       ICKPT_COMPRESS_FAST = 2, ICKPT_COMPRESS_HIGH = 3, ICKPT_COMPRESS_LEVEL = 4

  integer(c_int32_t), parameter :: ICKPT_PRECOPY_OFF = 0, ICKPT_PRECOPY_BLIND = 1, &
       ICKPT_PRECOPY_PRWIP = 2, ICKPT_PRECOPY_PRWIP_OPT = 3

  ! ickpt_config, field for field (120 bytes, as in C).
  type, bind(C) :: ickpt_config
     integer(c_int32_t) :: struct_size, backend, full_every, keep_chains
     type(c_ptr) :: dir
     integer(c_int64_t) :: bandwidth
     integer(c_int32_t) :: mode, flush_order
     integer(c_int64_t) :: cow_bytes
     integer(c_int32_t) :: granularity, acck_pieces_log2, huge_pages, reserved_padding
     integer(c_int64_t) :: drain_bandwidth
     type(c_ptr) :: shared_dir, object_url
     integer(c_int32_t) :: keep_versions, keep_within_s
     integer(c_int32_t) :: policy, restore_weight_pct
     integer(c_int32_t) :: compression, compress_level
     integer(c_int32_t) :: precopy, checkpoint_interval_ms
  end type ickpt_config

  ! The directory ickpt_set_dir points a config at: it must outlive ickpt_init.
  character(kind=c_char, len=:), allocatable, target, save :: dir_buffer
  ! The same for ickpt_set_shared_dir.
  character(kind=c_char, len=:), allocatable, target, save :: shared_dir_buffer

  interface
     integer(c_int) function ickpt_config_init_sized(cfg, size) bind(C, name="ickpt_config_init_sized")
       import :: c_int, c_size_t, ickpt_config
       type(ickpt_config), intent(inout) :: cfg
       integer(c_size_t), value :: size
     end function ickpt_config_init_sized
     integer(c_int) function ickpt_init(cfg) bind(C, name="ickpt_init")
       import :: c_int, ickpt_config
       type(ickpt_config), intent(in) :: cfg
     end function ickpt_init
     integer(c_int) function ickpt_finalize() bind(C, name="ickpt_finalize")
       import :: c_int
     end function ickpt_finalize
     integer(c_int) function ickpt_wait_drained() bind(C, name="ickpt_wait_drained")
       import :: c_int
     end function ickpt_wait_drained
     integer(c_int) function ickpt_protect(id, ptr, len) bind(C, name="ickpt_protect")
       import :: c_int, c_int64_t, c_ptr, c_size_t
       integer(c_int64_t), value :: id
       type(c_ptr), value :: ptr
       integer(c_size_t), value :: len
     end function ickpt_protect
     integer(c_int) function ickpt_unprotect(id) bind(C, name="ickpt_unprotect")
       import :: c_int, c_int64_t
       integer(c_int64_t), value :: id
     end function ickpt_unprotect
     integer(c_int) function ickpt_checkpoint(info) bind(C, name="ickpt_checkpoint")
       import :: c_int, c_ptr
       type(c_ptr), value :: info
     end function ickpt_checkpoint
     integer(c_int) function ickpt_checkpoint_tagged(tag, info) bind(C, name="ickpt_checkpoint_tagged")
       import :: c_int, c_int64_t, c_ptr
       integer(c_int64_t), value :: tag
       type(c_ptr), value :: info
     end function ickpt_checkpoint_tagged
     integer(c_int) function ickpt_wait(info) bind(C, name="ickpt_wait")
       import :: c_int, c_ptr
       type(c_ptr), value :: info
     end function ickpt_wait
     integer(c_int) function ickpt_restore(version) bind(C, name="ickpt_restore")
       import :: c_int, c_int64_t
       integer(c_int64_t), value :: version
     end function ickpt_restore
     integer(c_int) function ickpt_restore_latest(version) bind(C, name="ickpt_restore_latest")
       import :: c_int, c_int64_t
       integer(c_int64_t), intent(out) :: version
     end function ickpt_restore_latest
     integer(c_int) function ickpt_restore_latest_tagged(version, tag) &
          bind(C, name="ickpt_restore_latest_tagged")
       import :: c_int, c_int64_t
       integer(c_int64_t), intent(out) :: version, tag
     end function ickpt_restore_latest_tagged
     integer(c_int) function ickpt_version_tag(version, tag) bind(C, name="ickpt_version_tag")
       import :: c_int, c_int64_t
       integer(c_int64_t), value :: version
       integer(c_int64_t), intent(out) :: tag
     end function ickpt_version_tag
     integer(c_int) function ickpt_latest(version) bind(C, name="ickpt_latest")
       import :: c_int, c_int64_t
       integer(c_int64_t), intent(out) :: version
     end function ickpt_latest
     ! Program sections (CAPE; docs/sections.md). `resume` receives the saves replayed.
     integer(c_int) function ickpt_section_start(resume) bind(C, name="ickpt_section_start")
       import :: c_int, c_int64_t
       integer(c_int64_t), intent(out) :: resume
     end function ickpt_section_start
     integer(c_int) function ickpt_section_save_c(name, info) bind(C, name="ickpt_section_save")
       import :: c_int, c_char, c_ptr
       character(kind=c_char), intent(in) :: name(*)
       type(c_ptr), value :: info
     end function ickpt_section_save_c
     integer(c_int) function ickpt_section_stop() bind(C, name="ickpt_section_stop")
       import :: c_int
     end function ickpt_section_stop
     integer(c_int) function ickpt_section_reset() bind(C, name="ickpt_section_reset")
       import :: c_int
     end function ickpt_section_reset
     integer(c_int) function ickpt_inject_c(path) bind(C, name="ickpt_inject")
       import :: c_int, c_char
       character(kind=c_char), intent(in) :: path(*)
     end function ickpt_inject_c
     integer(c_int) function ickpt_merge_c(a, b, out) bind(C, name="ickpt_merge")
       import :: c_int, c_char
       character(kind=c_char), intent(in) :: a(*), b(*), out(*)
     end function ickpt_merge_c
     type(c_ptr) function ickpt_last_error_c() bind(C, name="ickpt_last_error")
       import :: c_ptr
     end function ickpt_last_error_c
     type(c_ptr) function ickpt_result_name_c(r) bind(C, name="ickpt_result_name")
       import :: c_ptr, c_int32_t
       integer(c_int32_t), value :: r
     end function ickpt_result_name_c
     function ickpt_strlen(s) bind(C, name="strlen")
       import :: c_ptr, c_size_t
       type(c_ptr), value :: s
       integer(c_size_t) :: ickpt_strlen
     end function ickpt_strlen
  end interface

contains

  ! The defaults of every field (ickpt_config_init).
  subroutine ickpt_config_defaults(cfg)
    type(ickpt_config), intent(out) :: cfg
    integer(c_int) :: r
    r = ickpt_config_init_sized(cfg, c_sizeof(cfg))
  end subroutine ickpt_config_defaults

  ! Point cfg%dir at a copy of `dir` that lives as long as the program (one at a time).
  subroutine ickpt_set_dir(cfg, dir)
    type(ickpt_config), intent(inout) :: cfg
    character(len=*), intent(in) :: dir
    call keep_c_string(dir_buffer, dir, cfg%dir)
  end subroutine ickpt_set_dir

  ! Point cfg%shared_dir at a copy of `dir` that lives as long as the program.
  subroutine ickpt_set_shared_dir(cfg, dir)
    type(ickpt_config), intent(inout) :: cfg
    character(len=*), intent(in) :: dir
    call keep_c_string(shared_dir_buffer, dir, cfg%shared_dir)
  end subroutine ickpt_set_shared_dir

  ! `s` as a C string in `buffer` (a module variable: it outlives ickpt_init), `p` at it.
  subroutine keep_c_string(buffer, s, p)
    character(kind=c_char, len=:), allocatable, target, intent(inout) :: buffer
    character(len=*), intent(in) :: s
    type(c_ptr), intent(out) :: p
    buffer = trim(s) // c_null_char
    p = c_loc(buffer)
  end subroutine keep_c_string

  ! A C string as a Fortran one ("" for NULL).
  function from_c(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: n, i
    if (.not. c_associated(p)) then
       s = ""
       return
    end if
    n = int(ickpt_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
       s(i:i) = chars(i)
    end do
  end function from_c

  ! Table I's save: the words the open section changed since its last save, under `name`.
  integer(c_int) function ickpt_section_save(name)
    character(len=*), intent(in) :: name
    ickpt_section_save = ickpt_section_save_c(trim(name) // c_null_char, c_null_ptr)
  end function ickpt_section_save

  ! Inject the delta file at `path` into the protected regions.
  integer(c_int) function ickpt_inject(path)
    character(len=*), intent(in) :: path
    ickpt_inject = ickpt_inject_c(trim(path) // c_null_char)
  end function ickpt_inject

  ! Merge the delta files `a` then `b` into `out`, `b` winning.
  integer(c_int) function ickpt_merge(a, b, out)
    character(len=*), intent(in) :: a, b, out
    ickpt_merge = ickpt_merge_c(trim(a) // c_null_char, trim(b) // c_null_char, &
         trim(out) // c_null_char)
  end function ickpt_merge

  ! The message of the last failed call on this thread.
  function ickpt_error() result(s)
    character(len=:), allocatable :: s
    s = from_c(ickpt_last_error_c())
  end function ickpt_error

  ! The name of a result code ("ICKPT_ERR_IO").
  function ickpt_result_name(r) result(s)
    integer(c_int), intent(in) :: r
    character(len=:), allocatable :: s
    s = from_c(ickpt_result_name_c(int(r, c_int32_t)))
  end function ickpt_result_name
end module ickpt
