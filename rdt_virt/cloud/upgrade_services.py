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

"""How an upgrade step runs the new release's tools and services.

:class:`Services` starts each of the cloud's daemons as
:class:`~rdt_virt.cloud.cloud.Cloud` does at its ``up``, but from the new
release's environment and without the first-time setup (databases,
users, endpoints), which the upgrade keeps; and it runs the steps'
commands (:mod:`rdt_virt.cloud.upgrade_plan`) with the new tools.

The control plane, the other compute host's services and guests, and the
steps' tools run at the lowest CPU priority (:data:`CONTROL_NICE`). In a cloud
they run on other machines than the protected server's host; here they
share this machine's two CPUs with its guest, and a schema migration or
a service's start would otherwise take its CPU time from the protected
server whose work the upgrade measures. Its own host's services keep the
guests' priority, as on a real compute host.

A nice value weighs a thread only against the others of its session's
autogroup where the kernel groups sessions (``kernel.sched_autogroup_enabled``,
Debian's default); each daemon is a session of its own, so the priority
is set on its autogroup as well (``/proc/PID/autogroup``).
"""

import contextlib
import glob
import os
import shutil
import time

from rdt_virt.cloud import cloud as cloud_mod
from rdt_virt.cloud import gnocchi as gnocchi_svc
from rdt_virt.cloud import ini
from rdt_virt.cloud import process
from rdt_virt.cloud import services as layout_mod
from rdt_virt.cloud import upgrade_plan as plan
from rdt_virt.emulator import enforce
from rdt_virt.sandbox import layout as sandbox_layout


#: The API paste files the cloud copies from an environment at its up:
#: {daemon: (directory under etc, file)}. Files a package owns and the
#: operator leaves as they are: an upgrade brings the new release's.
PASTE = {'glance-api': ('glance', 'glance-api-paste.ini'),
         'neutron-api': ('neutron', 'api-paste.ini'),
         'nova-api': ('nova', 'api-paste.ini')}

#: nice of the control plane's daemons and tools (see the module), and of
#: the compute hosts' services and guests.
CONTROL_NICE, HOST_NICE = 19, 0
HOSTS = tuple(h for h, _ in layout_mod.COMPUTES)
#: Seconds a restarted rdt-virt-agent may take to serve its metrics.
AGENT_READY = 120


class UpgradeError(Exception):
    pass


def lower(pid, nice, group=True):
    """``pid`` and its autogroup at ``nice``; False if it is gone.

    :param group: ``pid``'s whole process group, not only the process.
    """
    try:
        os.setpriority(os.PRIO_PGRP if group else os.PRIO_PROCESS, pid,
                       nice)
    except OSError:
        return False
    try:
        with open('/proc/%d/autogroup' % pid, 'w') as f:
            f.write(str(nice))
    except OSError:
        pass    # no autogroups: the nice value is all there is
    return True


@contextlib.contextmanager
def priority(nice):
    """This thread, and what it starts meanwhile, at ``nice``."""
    was = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, was)


def guests(sandbox):
    """The QEMU processes of a host's libvirtd: their pids.

    From libvirt's pid files in the sandbox's private run directory.
    """
    run = sandbox_layout.Paths(sandbox).private('/run/libvirt')
    pids = []
    for path in sorted(glob.glob(os.path.join(run, 'qemu', '*.pid'))):
        try:
            with open(path) as f:
                pids.append(int(f.read().strip()))
        except (OSError, ValueError):
            continue    # a guest that is starting or gone
    return pids


def nice_share(nice):
    """The CPU weight of a task at ``nice`` against one at nice 0.

    CFS gives each nice step 1.25 times less weight (the kernel's
    ``sched_prio_to_weight``: 1024 at 0, 15 at 19).
    """
    return 1.25 ** -nice


def weigh_guest(pid, nice, cgroup_root='/sys/fs/cgroup', proc='/proc'):
    """The cgroup of the libvirt domain that runs ``pid``, weighed as ``nice``.

    libvirt puts each guest in a cgroup of its own under the machine
    partition (``/machine/qemu-N-NAME.libvirt-qemu``). CFS shares the
    CPUs among the guests' cgroups by their weights (``cpu.shares``,
    ``cpu.weight``), and a nice value weighs only inside one: a guest at
    nice 19 still had the weight of any other guest.

    :returns: the cgroup's directory, or None where ``pid`` runs in no
        domain's cgroup (or it is gone).
    """
    backend, _ = enforce.probe(cgroup_root, proc)
    own = backend.own_cgroup(pid) if backend else None
    domain = enforce.libvirt_domain(own) if own else None
    if domain is None:
        return None
    path = backend.path(domain)
    try:
        backend.set_weight(path, nice_share(nice))
    except enforce.CgroupError:
        return None     # a guest that ended meanwhile
    return path


def lower_guest(pid, nice, cgroup_root='/sys/fs/cgroup'):
    """A guest's QEMU at ``nice``: its threads, autogroup and cgroup.

    libvirt daemonizes QEMU into a session of its own, out of the process
    group of the sandbox that runs libvirtd; a nice value set on a process
    holds for one thread only, and the vCPUs are threads. Its domain's
    cgroup gets the weight of that nice value (:func:`weigh_guest`).
    """
    try:
        tids = os.listdir('/proc/%d/task' % pid)
    except OSError:
        return False
    for tid in tids:
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except (OSError, ValueError):
            pass    # a thread that ended meanwhile
    weigh_guest(pid, nice, cgroup_root)
    return lower(pid, nice, group=False)


def elsewhere(name, home=None):
    """Whether daemon ``name`` runs, in a cloud, apart from host ``home``.

    The control plane's, and another compute host's: on this one machine
    they share the CPUs of ``home``'s guests, which in a cloud they do
    not. Without ``home``, the control plane's.
    """
    host = name.split('-', 1)[0]
    return host not in HOSTS or (home is not None and host != home)


class Services(object):
    """The cloud's services from the environment of ``new`` (a Cloud).

    :param gnocchi_bin: Gnocchi's environment, which the upgrade keeps.
    """

    def __init__(self, new, gnocchi_bin, out=print):
        self.new = new
        self.gnocchi_bin = gnocchi_bin
        self.out = out
        #: The host whose guest the upgrade measures (see elsewhere).
        self.home = None
        # At the spawn, not once it answers: an API's start-up (its
        # imports, its first requests) is CPU time the guests would lose.
        new.daemons.on_start = self._spawned

    def _spawned(self, name, pid):
        if elsewhere(name, self.home):
            lower(pid, CONTROL_NICE)

    def tool(self, name):
        if name.startswith('gnocchi'):
            return os.path.join(self.gnocchi_bin, name)
        return self.new.layout.tool(name)

    def confs(self):
        etc = self.new.layout.etc
        return {'keystone': etc('keystone', 'keystone.conf'),
                'placement': etc('placement', 'placement.conf'),
                'glance': etc('glance', 'glance-api.conf'),
                'neutron': etc('neutron', 'neutron.conf'),
                'nova': etc('nova', 'nova.conf'),
                'gnocchi': etc('gnocchi', 'gnocchi.conf'),
                'ceilometer': etc('ceilometer',
                                  'ceilometer-notification.conf'),
                'watcher': etc('watcher', 'watcher.conf')}

    def command(self, cmd):
        argv = ['nice', '-n', str(CONTROL_NICE), self.tool(cmd.argv[0])] + \
            plan.format_argv(cmd.argv[1:], self.confs())
        log = self.new.daemons.log_file('upgrade-' + cmd.argv[0])
        t = time.monotonic()
        rc = process.run(argv, env=self.new.env(), log=log, check=False)
        self.out('$ %s   (exit %d, %.0f s)' % (' '.join(cmd.argv[:1] + [
            os.path.basename(a) for a in argv[4:]]), rc,
            time.monotonic() - t))
        if cmd.codes is not None and rc not in cmd.codes:
            raise UpgradeError('%s failed (exit %d):\n%s' % (
                ' '.join(argv), rc, process.tail(log)))
        if rc:
            self.out(process.tail(log, 12).rstrip())

    def retool(self, host):
        """The new environment's privsep helper in the host's configuration.

        The one path a package upgrade keeps and a new virtualenv does not.
        """
        helper = self.new.layout.tool('privsep-helper')
        nova = self.new.layout.etc('nova', 'nova-cpu-%s.conf' % host)
        line = '%s --config-file %s' % (helper, nova)
        ini.set_many(nova, {s: {'helper_command': line} for s in (
            'privsep', 'nova_sys_admin', 'privsep_osbrick')})
        agent = self.new.host_dir(host, 'etc', 'rdt-virt.conf')
        ini.iniset(agent, 'rdt_virt_privsep', 'helper_command',
                   'sudo %s --config-file %s' % (helper, agent))

    def pin_compute_rpc(self):
        """``[upgrade_levels] compute = auto`` in each Nova configuration.

        Nova's services send compute RPC messages at the newest version
        their release knows unless this caps them at the oldest
        nova-compute's: a 2026.1 conductor's live migration cast to a
        2025.1 compute was never taken up, and the migration stayed
        ``accepted``. Nova's upgrade guide sets it before the upgrade; the
        old services, started without it, send versions the new ones know.
        """
        for path in sorted(glob.glob(self.new.layout.etc('nova',
                                                         'nova*.conf'))):
            ini.iniset(path, 'upgrade_levels', 'compute', 'auto')

    def yield_cpu(self, nice=CONTROL_NICE):
        """Every running daemon :func:`elsewhere` at ``nice``.

        Its whole process group: the workers it forked, and those it forks
        later, which inherit the priority. ``HOST_NICE`` gives the cloud
        back its own priorities once the upgrade is over.
        """
        run_dir = self.new.daemons.run_dir
        for entry in sorted(os.listdir(run_dir)):
            name, ext = os.path.splitext(entry)
            pid = self.new.daemons.pid(name) if ext == '.pid' else None
            if pid and elsewhere(name, self.home):
                lower(pid, nice)
        self.lower_guests(nice)

    def lower_guests(self, nice=CONTROL_NICE):
        """The other host's guests at ``nice``: another machine's, in a cloud.

        A boot, a resize or a live migration starts a new QEMU there, which
        runs at libvirt's default weight until this runs again: the upgrade
        calls it every second of each step (a live migration's destination
        works from the migration's start).
        """
        for host in HOSTS:
            if self.home is not None and host != self.home:
                for pid in guests(self.new.host_dir(host, 'sandbox')):
                    lower_guest(pid, nice)

    def start(self, name):
        """Start daemon ``name`` from the new environment."""
        if elsewhere(name, self.home):
            self._start(name)
            self.yield_cpu()
        else:
            with priority(HOST_NICE):
                self._start(name)

    def _start(self, name):
        new, layout = self.new, self.new.layout
        confs = self.confs()
        host = name.split('-', 1)[0]
        if name == 'watcher-api':
            new.uwsgi(name, extra=['--pyargv',
                                   '--config-file %s' % confs['watcher']])
            new.wait_http(name, layout.url('watcher'))
        elif name in cloud_mod.WSGI:
            if name in PASTE:
                where, paste = PASTE[name]
                shutil.copy(os.path.join(layout.venv, 'etc', where, paste),
                            layout.etc(where, paste))
            new.uwsgi(name)
            if name == 'keystone':
                new.wait_http(name, layout.keystone_url)
        elif name in ('nova-conductor', 'nova-scheduler',
                      'watcher-decision-engine', 'watcher-applier',
                      'ceilometer-notification'):
            tool = layout.tool('ceilometer-agent-notification'
                               if name.startswith('ceilometer') else name)
            conf = confs[name.split('-')[0]]
            new.daemons.start(name, [tool, '--config-file', conf],
                              env=new.env(), marker=tool)
        elif name == gnocchi_svc.API:
            gnocchi_svc.Gnocchi(new.daemons, self.gnocchi_bin,
                                confs['gnocchi'],
                                layout.ports['gnocchi']).start()
        elif name == gnocchi_svc.METRICD:
            pass    # started with the API
        elif name.endswith('-nova-compute'):
            conf = layout.etc('nova', 'nova-cpu-%s.conf' % host)
            new.daemons.start(name, new.in_sandbox(host, [
                layout.tool('nova-compute'), '--config-file', conf]),
                env=new.env(), marker=conf)
        elif name.endswith('-rdt-virt-agent'):
            new.start_agent(host)
            # Serving before nova-compute and the polling agent start,
            # whose imports would take its CPU time: its series has no
            # point from its stop until it serves.
            new.daemons.wait_port(name, layout.ports['agent_prom_%s' % host],
                                  timeout=AGENT_READY)
        elif name.endswith('-ceilometer-polling'):
            conf = layout.etc('ceilometer', 'ceilometer-%s.conf' % host)
            new.daemons.start(name, [
                layout.tool('ceilometer-polling'), '--polling-namespaces',
                'compute', '--config-file', conf], env=new.env(),
                marker=conf)
        else:
            raise UpgradeError('no way to start %s' % name)

    def service_version(self, host):
        """The service version ``host``'s nova-compute last recorded."""
        import sqlalchemy
        engine = sqlalchemy.create_engine(
            self.new.layout.db_url('nova_cell1'))
        try:
            with engine.connect() as conn:
                return conn.execute(sqlalchemy.text(
                    "SELECT version FROM services WHERE host = :host AND "
                    "`binary` = 'nova-compute' AND deleted = 0"),
                    {'host': host}).scalar()
        finally:
            engine.dispose()
