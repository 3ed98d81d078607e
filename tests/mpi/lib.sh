# Sourced by tests/mpi/run.sh, tests/mpi/soak.sh, scripts/bench-mpi.sh and demo/run.sh: how
# to launch an MPI job, bounded, and how to kill one whole. Needs bash.

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Seconds any one MPI job may take before it counts as hung (timeout kills it).
: "${MPI_BOUND:=120}"
export MPI_BOUND

# mpi_session_dir DIR: Open MPI keeps its session directory and its shared-memory segments
# (vader, 4 MiB per rank) in DIR instead of /tmp and /dev/shm. A job killed with SIGKILL
# leaves them behind; kill_session removes them, so kill campaigns do not fill the disk (a
# day of them left 1.5 GB in /tmp and /dev/shm).
mpi_session_dir() {
    mkdir -p "$1"
    export OMPI_MCA_orte_tmpdir_base=$1 OMPI_MCA_prte_tmpdir_base=$1
    export OMPI_MCA_btl_vader_backing_directory=$1
    export ICKPT_MPI_SESSION_DIR=$1
}

# The launcher that goes with an MPI compiler wrapper: mpicc.mpich runs under mpiexec.mpich,
# mpicc.openmpi under mpirun.openmpi, a plain mpicc under the mpirun beside it in PATH.
launcher_for() {
    case $1 in
    *.mpich) echo mpiexec.mpich ;;
    *.openmpi) echo mpirun.openmpi ;;
    *) echo mpirun ;;
    esac
}

# The launcher's command line for N ranks, as words: Open MPI wants --oversubscribe for more
# ranks than cores.
launch_words() {
    local launcher=$1 n=$2 v
    # "mpirun (Open MPI) 4.1.4", or through the .openmpi name "mpirun.openmpi (OpenRTE)".
    v=$("$launcher" --version 2>&1)
    if [[ $v == *"Open MPI"* || $v == *OpenRTE* ]]; then
        echo "$launcher --oversubscribe -np $n"
    else
        echo "$launcher -np $n"
    fi
}

# mpi_run LAUNCHER N PROG ARGS...: the job, bounded by MPI_BOUND seconds.
mpi_run() {
    local launcher=$1 n=$2
    shift 2
    timeout -k 5 "$MPI_BOUND" $(launch_words "$launcher" "$n") "$@"
}

# mpi_run_first_env LAUNCHER N VAR=VALUE PROG ARGS...: MPMD, rank 0 runs with VAR=VALUE in
# its environment (env VAR=VALUE PROG ARGS), the other N-1 ranks without.
mpi_run_first_env() {
    local launcher=$1 n=$2 envs=$3
    shift 3
    timeout -k 5 "$MPI_BOUND" $(launch_words "$launcher" 1) env "$envs" "$@" : -np $((n - 1)) "$@"
}
export -f launch_words mpi_run mpi_run_first_env

# The newest global version rank $2 (default 0) has recorded in the job directory $1 (0: none).
newest_global() {
    local g
    g=$(ls "$1/rank-$(printf %05d "${2:-0}")" 2>/dev/null |
        sed -n 's/^g0*\([0-9][0-9]*\)\.global$/\1/p' |
        sort -n | tail -n1)
    echo "${g:-0}"
}

# kill_session PID PATTERN: SIGKILL every process of the session PID leads (a job started
# with setsid), and every process whose command line starts with PATTERN (ranks an MPI
# started in sessions of their own), until none is left: at most 5 s, then it fails.
kill_session() {
    local pid=$1 pattern=$2 i
    # Reaped by the polling below: bash need not report the kill ("Killed" lines).
    disown "$pid" 2>/dev/null
    pkill -KILL -s "$pid" 2>/dev/null
    for i in $(seq 50); do
        pkill -KILL -f "^$pattern" 2>/dev/null
        if ! kill -0 "$pid" 2>/dev/null && ! pgrep -s "$pid" >/dev/null &&
            ! pgrep -f "^$pattern" >/dev/null; then
            # What the killed job's MPI left: nothing of ours runs now.
            [ -z "${ICKPT_MPI_SESSION_DIR:-}" ] || rm -rf "${ICKPT_MPI_SESSION_DIR:?}"/*
            return 0
        fi
        sleep 0.1
    done
    echo "processes of the job survived SIGKILL" >&2
    return 1
}

# A random delay of 0 to $1 seconds, for kill schedules.
random_delay() {
    awk -v s="$RANDOM" -v max="$1" 'BEGIN { srand(s); printf "%.3f", rand() * max }'
}
