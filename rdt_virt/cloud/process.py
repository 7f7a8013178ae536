# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The cloud's daemons: one pid file and one log file each, in one directory.

A daemon is known by the pid in ``<run>/<name>.pid`` and by a marker string
its command line must contain (pids are reused); nothing else on the
machine is ever signalled.
"""

import os
import signal
import socket
import subprocess
import time


class ProcessError(Exception):
    """A daemon did not start or stop."""


class Daemons(object):
    """Start and stop daemons with pid files under ``run_dir``."""

    def __init__(self, run_dir, log_dir, on_start=None):
        """Daemons whose pid files are under ``run_dir``.

        :param on_start: called with (name, pid) as soon as a daemon is
            spawned, before it is known to be up (an upgrade sets its CPU
            priority there, before its start-up work).
        """
        self.run_dir = run_dir
        self.log_dir = log_dir
        self.on_start = on_start

    def pid_file(self, name):
        return os.path.join(self.run_dir, name + '.pid')

    def log_file(self, name):
        return os.path.join(self.log_dir, name + '.log')

    def pid(self, name):
        """The daemon's pid if it is alive and still the same program."""
        try:
            with open(self.pid_file(name)) as f:
                pid, marker = f.read().split('\n', 1)
            pid = int(pid)
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                cmdline = f.read().replace(b'\0', b' ').decode(
                    errors='replace')
            with open('/proc/%d/stat' % pid) as f:
                zombie = f.read().rsplit(')', 1)[1].split()[0] == 'Z'
        except (OSError, ValueError):
            return None
        return pid if marker.strip() in cmdline and not zombie else None

    def start(self, name, argv, env=None, marker=None, cwd=None,
              timeout=10.0):
        """Start ``argv`` detached, output to its log; returns the pid.

        Returns once :meth:`pid` knows the daemon, once it has exited,
        or after ``timeout`` seconds.
        """
        if self.pid(name):
            raise ProcessError('%s is already running' % name)
        os.makedirs(self.run_dir, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        with open(self.log_file(name), 'ab') as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env, cwd=cwd,
                start_new_session=True)
        if self.on_start is not None:
            self.on_start(name, proc.pid)
        with open(self.pid_file(name), 'w') as f:
            f.write('%d\n%s\n' % (proc.pid, marker or argv[0]))
        # Popen returns as soon as the kernel releases the parent, which
        # is before the new program's command line is in place: until
        # then /proc shows none, and the daemon would read as down.
        deadline = time.monotonic() + timeout
        while (not self.pid(name) and proc.poll() is None and
               time.monotonic() < deadline):
            time.sleep(0.005)
        return proc.pid

    def stop(self, name, timeout=20.0):
        """SIGTERM the daemon's process group, SIGKILL after ``timeout``."""
        self.stop_all([name], timeout)

    def stop_all(self, names, timeout=20.0):
        """:meth:`stop` several daemons at once: one timeout for all.

        oslo.service daemons take seconds to shut down gracefully; one
        after the other, a cloud's worth took minutes.
        """
        pids = {name: self.pid(name) for name in names}
        for pid in filter(None, pids.values()):
            _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while (any(self.pid(name) for name in names) and
               time.monotonic() < deadline):
            time.sleep(0.2)
        for name, pid in pids.items():
            if pid and self.pid(name):
                _signal_group(pid, signal.SIGKILL)
            try:
                os.unlink(self.pid_file(name))
            except FileNotFoundError:
                pass

    def wait_port(self, name, port, timeout=120.0, host='127.0.0.1'):
        """Wait until the daemon listens on ``port``; fail if it dies."""
        self.wait(name, lambda: port_open(host, port), timeout,
                  'listen on %s:%d' % (host, port))

    def wait(self, name, ready, timeout, what):
        deadline = time.monotonic() + timeout
        missing = 0
        while not ready():
            # A process that re-executes itself (uWSGI) shows no command
            # line for a moment: gone only if missing three times.
            missing = 0 if self.pid(name) else missing + 1
            if missing >= 3:
                raise ProcessError('%s exited before it could %s:\n%s' % (
                    name, what, tail(self.log_file(name))))
            if time.monotonic() > deadline:
                raise ProcessError('%s did not %s within %ds:\n%s' % (
                    name, what, timeout, tail(self.log_file(name))))
            time.sleep(0.3)


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def port_open(host, port):
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def free_port(host='127.0.0.1'):
    """A TCP port nothing listens on now (the kernel picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def tail(path, lines=40):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
    except OSError:
        return ''


def run(argv, env=None, log=None, user=None, check=True, cwd=None):
    """Run a setup command; its output goes to ``log`` (appended)."""
    if user:
        argv = ['runuser', '-u', user, '--'] + list(argv)
    out = open(log, 'ab') if log else subprocess.DEVNULL
    try:
        rc = subprocess.call(argv, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, env=env, cwd=cwd)
    finally:
        if log:
            out.close()
    if check and rc:
        raise ProcessError('%s failed (exit %d)%s' % (
            ' '.join(argv), rc, ':\n' + tail(log) if log else ''))
    return rc


def main(argv=None):
    """``python -m rdt_virt.cloud.process start|stop RUN LOG NAME [CMD...]``

    DevStack's run_process and stop_process for the DevStack plugin when
    the cloud runs it.
    """
    import sys
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 4 or argv[0] not in ('start', 'stop'):
        print('usage: python -m rdt_virt.cloud.process start RUN_DIR '
              'LOG_DIR NAME COMMAND... | stop RUN_DIR LOG_DIR NAME',
              file=sys.stderr)
        return 2
    daemons = Daemons(argv[1], argv[2])
    if argv[0] == 'start':
        if daemons.pid(argv[3]):
            print('%s is already running' % argv[3])
            return 0
        daemons.start(argv[3], argv[4:], marker=argv[4])
    else:
        daemons.stop(argv[3])
    return 0


if __name__ == '__main__':
    import sys
    sys.exit(main())
