# Shared settings for localstack/install, up and down. Sourced, not run.
LS_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LS_ROOT=$(cd "$LS_HERE/.." && pwd)
LS_STATE=${LOCALSTACK_STATE_DIR:-$LS_ROOT/.localstack}
LS_VENV=$LS_STATE/venv
LS_FS=$LS_STATE/filesystem
LS_URL=http://127.0.0.1:4566
LS_PID=$LS_STATE/localstack.pid
LS_LOG=$LS_STATE/localstack.log
# AWS's local durable-execution runner (dex-local-runner), beside LocalStack: durable.py
DEX_PORT=4590
DEX_URL=http://127.0.0.1:$DEX_PORT
DEX_PID=$LS_STATE/dex.pid
DEX_LOG=$LS_STATE/dex.log

ls_healthy() { curl -fsS --max-time 2 "$LS_URL/_localstack/health" >/dev/null 2>&1; }

# localstack-core 2026.3.0 needs Python 3.13; pyenv's shim only answers when that
# version is selected, so also look in pyenv's versions folder.
ls_python313() {
  local candidate
  for candidate in "$(command -v python3.13 2>/dev/null)" \
                   "$(pyenv root 2>/dev/null)"/versions/3.13*/bin/python3.13 \
                   /usr/bin/python3.13 /usr/local/bin/python3.13; do
    if [ -n "$candidate" ] && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "localstack: no working python3.13 found (needed by localstack-core)" >&2
  return 1
}

# This machine's pip config names local mirrors that may be absent; drop that noise only.
quiet_pip() { grep -v "is ignored: it is neither a file nor a directory" || true; }

# uv, in the project's venv (scripts/setup puts it there), installs what pip would in a
# fraction of the time (CI's set-up: 85 s of its 12 minutes with pip). Compiled to
# bytecode at install, as pip does: where PYTHONDONTWRITEBYTECODE is set (this machine
# sets it), nothing else would ever write it, and every process (each test worker, each
# Lambda sandbox) would compile every module it imports anew.
UV_VERSION=0.13.10

# venv_install PYTHON ARGS...: pip's `install ARGS` into PYTHON's venv (`-C` for a build
# setting), by uv when the project's venv has it, else, or should uv fail (it reads none of
# pip's own configuration: a mirror only pip.conf names), by that venv's pip.
venv_install() {
  local python=$1 arg
  shift
  if [ -x "$LS_ROOT/.venv/bin/uv" ] \
     && "$LS_ROOT/.venv/bin/uv" pip install --quiet --compile-bytecode --python "$python" "$@"; then
    return 0
  fi
  local args=()
  for arg in "$@"; do  # (pip before 23.1 knows the long form only)
    [ "$arg" = -C ] && arg=--config-settings
    args+=("$arg")
  done
  "$python" -m pip install --quiet --disable-pip-version-check --no-warn-script-location \
    "${args[@]}" 2>&1 | quiet_pip
}
