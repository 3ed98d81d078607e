! An unmodified Fortran program for `ickpt run` tests: a 1-D heat stencil on allocatable
! arrays, a work array reallocated larger every few steps (the heap grows), and a checksum
! line per step written with WRITE to the file named by the first argument, opened with OPEN
! (libgfortran buffers it; the buffer is program memory, restored with it). The final
! checksum goes to standard output once.
program fheat
  implicit none
  character(len=4096) :: path
  character(len=32) :: arg
  integer :: steps, n, s, i, u, grown
  real(8), allocatable :: x(:), y(:), work(:)
  integer(8) :: cs, total
  integer(8) :: t0, t1, rate

  if (command_argument_count() < 3) then
    write (0, '(A)') 'usage: heat_f OUT STEPS N'
    stop 2
  end if
  call get_command_argument(1, path)
  call get_command_argument(2, arg)
  read (arg, *) steps
  call get_command_argument(3, arg)
  read (arg, *) n
  allocate (x(n), y(n))
  do i = 1, n
    x(i) = real(mod(i * 7919, 1000), 8) / 1000.0d0
  end do
  y = x
  grown = 16
  allocate (work(grown))
  work = 0
  total = 0
  open (newunit=u, file=trim(path), status='replace', action='write', form='formatted')
  do s = 1, steps
    y(2:n - 1) = x(2:n - 1) + 0.25d0 * (x(1:n - 2) - 2.0d0 * x(2:n - 1) + x(3:n))
    x = y
    if (mod(s, 5) == 0) then
      ! A larger array each time: the heap grows while the program runs.
      deallocate (work)
      grown = grown + 1000
      allocate (work(grown))
      work = x(1:min(n, grown)) * s
    end if
    cs = 0
    do i = 1, n, 7
      cs = cs * 31 + int(x(i) * 1.0d9, 8)
    end do
    cs = cs + int(sum(work(1:min(grown, 64))) * 1.0d3, 8)
    total = total * 17 + cs
    write (u, '(A,I0,A,I0,A,I0)') 'step ', s, ' ', cs, ' ', grown
    ! 1 ms of waiting on the clock: time for checkpoints to land mid-run.
    call system_clock(t0, rate)
    do
      call system_clock(t1)
      if ((t1 - t0) * 1000 >= rate) exit
    end do
  end do
  close (u)
  write (*, '(A,I0,A,I0,A)') 'final ', total, ' after ', steps, ' steps'
end program fheat
