! Program sections through the Fortran module: a section saves a vector three
! times under one name; a second run, after its prefix, replays them (resume = 3) and finds
! the vector as the first run left it; a save outside a section is refused.
! Usage: sections_f DIR
program sections_f
  use ickpt
  implicit none
  real(c_float), allocatable, target :: v(:), want(:)
  type(ickpt_config) :: cfg
  character(len=4096) :: dir
  integer(c_int64_t) :: resume
  integer :: run, l
  call get_command_argument(1, dir)
  allocate(v(3000), want(3000))
  do run = 1, 2
     call ickpt_config_defaults(cfg)
     call ickpt_set_dir(cfg, dir)
     if (ickpt_init(cfg) /= ICKPT_OK) error stop ickpt_error()
     if (ickpt_protect(1_c_int64_t, c_loc(v), c_sizeof(v(1)) * size(v, kind=c_size_t)) /= ICKPT_OK) &
          error stop ickpt_error()
     v = 0.0
     if (ickpt_section_start(resume) /= ICKPT_OK) error stop ickpt_error()
     if (run == 1) then
        if (resume /= 0) error stop "a fresh run resumed"
        do l = 1, 3
           v(l * 100:l * 100 + 50) = real(l)
           if (ickpt_section_save("loop") /= ICKPT_OK) error stop ickpt_error()
        end do
        want = v
     else
        if (resume /= 3) error stop "the second run did not replay 3 saves"
        if (any(v /= want)) error stop "the replayed vector differs"
     end if
     if (ickpt_section_stop() /= ICKPT_OK) error stop ickpt_error()
     if (ickpt_section_save("loop") /= ICKPT_ERR_SECTION) error stop "a save outside a section"
     if (ickpt_finalize() /= ICKPT_OK) error stop ickpt_error()
  end do
  print '(a)', "sections_f: ok"
end program sections_f
