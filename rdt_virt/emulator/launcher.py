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

"""Start and stop the emulated resctrl filesystem.

:func:`mount` runs the filesystem in a child process (``rdt-virt-emulator
mount --foreground``, in its own session so it outlives the caller if it
must), waits until the mount is visible in ``/proc/self/mountinfo`` and the
control socket answers, and returns an :class:`EmulatorHandle`. The child
serves FUSE and the control socket from one model; libfuse unmounts when the
child gets SIGTERM. :func:`serve` is what that child runs.
"""

import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from oslo_log import log as logging

from rdt_virt.emulator import control
from rdt_virt.emulator import fromtree
from rdt_virt.emulator import kernels
from rdt_virt.emulator import kparse
from rdt_virt.emulator import profiles

LOG = logging.getLogger(__name__)
FSTYPE = 'fuse.resctrl'
DEV_FUSE = '/dev/fuse'
#: Seconds between two samples of every thread's CPU time.
REFRESH_INTERVAL = 0.5


class EmulatorError(Exception):
    """The emulator could not be started or stopped."""


def _unescape(path):
    # mountinfo escapes blanks and backslashes as octal.
    for code in ('\\040', '\\011', '\\012', '\\134'):
        path = path.replace(code, chr(int(code[1:], 8)))
    return path


def is_mounted(mountpoint, fstype=FSTYPE):
    """True if *mountpoint* has a filesystem of type *fstype* mounted."""
    target = os.path.realpath(mountpoint)
    try:
        with open('/proc/self/mountinfo') as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        sep = fields.index('-')
        if (_unescape(fields[4]) == target and
                fields[sep + 1] == fstype):
            return True
    return False


def host_cpus(sysfs='/sys/devices/system/cpu'):
    """``(online cpus, nr_cpu_ids)`` of this host."""
    def cpulist(name):
        with open(os.path.join(sysfs, name)) as f:
            return kparse.parse_cpulist(f.read().strip(), 1 << 16)
    online = cpulist('online')
    try:
        possible = cpulist('possible')
    except OSError:
        possible = online
    return sorted(online), max(possible | online) + 1


def check_prerequisites(mountpoint):
    """Raise :class:`EmulatorError` with advice when a mount cannot work."""
    if not os.path.exists(DEV_FUSE):
        raise EmulatorError('%s is missing: load the fuse module (modprobe '
                            'fuse) or give the container the device'
                            % DEV_FUSE)
    if not (ctypes.util.find_library('fuse3') or
            os.environ.get('FUSE_LIBRARY_PATH')):
        raise EmulatorError('libfuse3 is not installed: apt-get install '
                            'fuse3 libfuse3-3')
    if not os.path.isdir(mountpoint):
        raise EmulatorError('mount point %s does not exist or is not a '
                            'directory' % mountpoint)
    if is_mounted(mountpoint):
        raise EmulatorError('an emulated resctrl is already mounted on %s'
                            % mountpoint)
    if os.listdir(mountpoint):
        raise EmulatorError('mount point %s is not empty' % mountpoint)


def unmount(mountpoint, lazy=False):
    """Unmount a FUSE mount (``fusermount3 -u``, else ``umount``)."""
    flags = '-uz' if lazy else '-u'
    for cmd in (['fusermount3', flags, mountpoint],
                ['fusermount', flags, mountpoint],
                ['umount'] + (['-l'] if lazy else []) + [mountpoint]):
        if not shutil.which(cmd[0]):
            continue
        result = subprocess.run(cmd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        if result.returncode == 0:
            return True
    return False


class EmulatorHandle(object):
    """A running emulator.

    :ivar pid: the process serving the mount.
    :ivar profile: name of the profile it was mounted with.
    :ivar kernel: spec of the kernel it emulates.
    :ivar mountpoint: where it is mounted.
    :ivar control_socket: path of its control socket.
    :ivar client: a :class:`~rdt_virt.emulator.control.ControlClient`.
    :ivar log_path: the process's stdout and stderr.
    :ivar osrelease: a file holding the emulated kernel's release, for
        ``[rdt] kernel_release_file`` (the host's own
        ``/proc/sys/kernel/osrelease`` cannot be changed).
    """

    def __init__(self, pid, mountpoint, control_socket, process=None,
                 log_path=None, tmpdir=None, profile=None, kernel=None,
                 osrelease=None):
        self.pid = pid
        self.osrelease = osrelease
        self.profile = profile
        self.kernel = kernel
        self.mountpoint = mountpoint
        self.control_socket = control_socket
        self.client = control.ControlClient(control_socket)
        self.log_path = log_path
        self._process = process
        self._tmpdir = tmpdir

    def alive(self):
        if self._process is not None:
            return self._process.poll() is None
        try:
            os.kill(self.pid, 0)
            return True
        except OSError:
            return False

    def _wait(self, timeout):
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        return not self.alive()

    def stop(self, timeout=10.0):
        """Unmount and wait for the process to exit (then SIGKILL)."""
        if is_mounted(self.mountpoint):
            unmount(self.mountpoint)
        if not self._wait(timeout) and self.alive():
            os.kill(self.pid, signal.SIGTERM)
            if not self._wait(timeout / 2):
                os.kill(self.pid, signal.SIGKILL)
                self._wait(timeout / 2)
        if is_mounted(self.mountpoint):
            unmount(self.mountpoint, lazy=True)
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _tail(path, lines=20):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
    except OSError:
        return ''


def mount(mountpoint, profile='reference', control_socket=None,
          legacy=False, limbo_delay=None, log_path=None, timeout=30.0,
          debug=False, kernel=None, cmdline=None, from_tree=None,
          mba_effect=False, osrelease=None, mon_scale=None):
    """Mount the emulated resctrl on *mountpoint* in a child process.

    :param profile: profile name (see :data:`profiles.PROFILES`).
    :param control_socket: path of the control socket (default: in a
        private temporary directory removed by :meth:`EmulatorHandle.stop`).
    :param legacy: behave as Linux 6.1 (``kernel='6.1'``).
    :param kernel: kernel spec, e.g. ``'6.1+bw_validate'`` (see
        :mod:`~rdt_virt.emulator.kernels`; default: the newest release, or
        with *from_tree* the one the capture came from).
    :param cmdline: kernel command line of the emulated boot (default: the
        profile's; ``rdt=`` options and CPU quirks decide what is enabled).
    :param from_tree: emulate the host captured in this directory (see
        :mod:`fromtree`); *profile* is then ignored.
    :param mon_scale: with *from_tree*, bytes per counter unit (default:
        the vendor's).
    :param limbo_delay: seconds between limbo checks (default 1.0).
    :param log_path: file for the child's output (default: next to the
        default control socket, or discarded).
    :param mba_effect: make MB throttles slow the throttled threads down
        (CPU quotas, see :mod:`enforce`), not only the counters.
    :param osrelease: file to write the emulated kernel's release to
        (default: in the private temporary directory).
    :returns: :class:`EmulatorHandle`.
    :raises EmulatorError: with the reason when the mount cannot be made.
    """
    if from_tree:
        from_tree = os.path.abspath(from_tree)
        profile = fromtree.load(from_tree, mon_scale=mon_scale)
        if kernel is None and not legacy:
            kernel = fromtree.guess_kernel(from_tree)[0]
    else:
        profile = profiles.get_profile(profile)
    if kernel is None and legacy:
        kernel = '6.1'
    kernel = kernels.get_kernel(kernel)
    mountpoint = os.path.abspath(mountpoint)
    check_prerequisites(mountpoint)
    tmpdir = None
    if control_socket is None or log_path is None or osrelease is None:
        tmpdir = tempfile.mkdtemp(prefix='rdt-virt-emulator-')
        control_socket = control_socket or os.path.join(tmpdir, 'control')
        log_path = log_path or os.path.join(tmpdir, 'emulator.log')
        osrelease = osrelease or os.path.join(tmpdir, 'osrelease')
    with open(osrelease, 'w') as f:
        f.write(kernel.osrelease + '\n')
    cmd = [sys.executable, '-m', 'rdt_virt.cmd.emulator', 'mount',
           '--foreground', '--profile', profile.name,
           '--control', control_socket, '--kernel', kernel.spec,
           mountpoint]
    cmdline = profile.cmdline if cmdline is None else cmdline
    cmd[-1:-1] = ['--cmdline', cmdline]
    if from_tree:
        cmd[-1:-1] = ['--from-tree', from_tree]
        if mon_scale:
            cmd[-1:-1] = ['--mon-scale', str(mon_scale)]
    if limbo_delay is not None:
        cmd += ['--limbo-delay', str(limbo_delay)]
    if debug:
        # An option of the command, not of its mount subcommand.
        cmd.insert(3, '--debug')
    if mba_effect:
        cmd.append('--mba-effect')
    # The child must import this very rdt_virt, wherever it came from.
    env = dict(os.environ)
    top = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env['PYTHONPATH'] = os.pathsep.join(
        [top] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep)
                 if p])
    with open(log_path, 'ab') as log:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, env=env)
    handle = EmulatorHandle(process.pid, mountpoint, control_socket,
                            process, log_path, tmpdir, profile.name,
                            kernel.spec, osrelease)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            tail = _tail(log_path)
            handle.stop()
            raise EmulatorError('the emulator exited with status %s:\n%s'
                                % (process.returncode, tail))
        if is_mounted(mountpoint):
            try:
                handle.client.ping()
                return handle
            except control.ControlError:
                pass
        if time.monotonic() > deadline:
            tail = _tail(log_path)
            handle.stop()
            raise EmulatorError('the emulator did not come up within %ss:\n'
                                '%s' % (timeout, tail))
        time.sleep(0.05)


def serve(mountpoint, profile, control_socket, legacy=False,
          limbo_delay=None, debug=False, kernel=None, mba_effect=False):
    """Build the model and serve FUSE and the control socket (blocks)."""
    # Imported here: mfusepy loads libfuse when imported.
    from rdt_virt.emulator import enforce
    from rdt_virt.emulator import faults
    from rdt_virt.emulator import fusefs
    from rdt_virt.emulator import model
    from rdt_virt.emulator import threads
    from rdt_virt.emulator import tree

    online, nr_cpu_ids = host_cpus()
    state = model.ResctrlModel(
        profile, threads.ProcThreads(), online_cpus=online,
        nr_cpu_ids=nr_cpu_ids, limbo_delay=limbo_delay, legacy=legacy,
        snapshot_max_age=0.05, kernel=kernel)
    enforcer = enforce.start(state) if mba_effect else None
    refusals = faults.Faults()
    server = control.ControlServer(control_socket, state, refusals)
    server.start()
    stop = threading.Event()
    ticker = threading.Thread(target=_tick, args=(state, stop, enforcer),
                              daemon=True, name='resctrl-counters')
    ticker.start()
    try:
        fusefs.serve(tree.ResctrlTree(state, time.time()), mountpoint,
                     debug=debug, faults=refusals)
    finally:
        stop.set()
        ticker.join(5)
        if enforcer:
            enforcer.release_all()
        server.stop()


def _tick(state, stop, enforcer=None, interval=REFRESH_INTERVAL):
    # Sample threads regularly: CPU time of a thread that exits between
    # two reads would otherwise never reach its group's counters.
    while not stop.wait(interval):
        with state.lock:
            state.refresh()
        if enforcer:
            try:
                enforcer.apply()
            except Exception:
                # The counters must keep going whatever cgroups do.
                LOG.exception('applying the MBA effect failed')
