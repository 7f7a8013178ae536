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

"""The agent with a real libvirtd and KVM guests on the emulated host.

Each test gets a sandbox (:mod:`rdt_virt.sandbox`): the emulated resctrl on
``/sys/fs/resctrl`` of a private mount namespace, libvirtd and QEMU inside
it. The agent runs outside, as it would on a compute host, reaching
resctrl through ``/proc/<pid>/root`` and libvirt through its socket. Thread
ids are checked against QEMU's own answer (QMP ``query-cpus-fast``), not
against what the agent reads.
"""

import os
import subprocess
import time
import uuid as uuid_mod

from rdt_virt.agent import domains
from rdt_virt.cmd import agent as agent_cmd
from rdt_virt import concurrency
from rdt_virt import conf as rdt_conf
from rdt_virt import privsep
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import namespace
from tests.functional import emulated

CONF = rdt_conf.CONF
P = 'rdtvirt-'
NOVA = ('<nova:instance xmlns:nova="http://openstack.org/xmlns/libvirt/nova/'
        '1.1"><nova:name>vm</nova:name></nova:instance>')
RDT = ('<rdtvirt:rdt xmlns:rdtvirt="http://openstack.org/xmlns/libvirt/'
       'rdt-virt/1.0" version="1">%s<rdtvirt:monitor enabled="yes"/>'
       '</rdtvirt:rdt>')
SHARED = '<rdtvirt:membw unit="percent" value="%d" group="shared"/>'
MUTATIONS = ('write', 'mkdir', 'rmdir', 'rename')


def metadata(pct=None):
    return NOVA + (RDT % (SHARED % pct) if pct else '')


def wait(check, timeout=10.0, what='condition'):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError('timed out waiting for %s' % what)


class LibvirtAgentTestCase(emulated.SandboxTestCase):

    def setUp(self):
        super().setUp()
        privsep.sys_admin_pctxt.set_client_mode(False)
        self.addCleanup(privsep.sys_admin_pctxt.set_client_mode, True)
        sb = self.sb.sandbox
        self.state_file = os.path.join(self.sb.dir, 'state.json')
        self.flags(resctrl_root=sb.resctrl_root, state_file=self.state_file,
                   default_group_l3_ways=8, group='rdt')
        self.flags(libvirt_uri=sb.uri, proc_root='/proc',
                   qemu_pid_dir=os.path.join(
                       sb.paths.private('/run/libvirt'), 'qemu'),
                   retry_interval=0.0, tick_interval=1.0,
                   sample_interval=1.0, prometheus_port=0,
                   group='rdt_agent')
        self.control = sb.control
        self.agent = agent_cmd.build_agent(CONF)
        self.seq = 0

    def boot(self, pct=None, vcpus=2, cputune=''):
        name = 'instance-%s' % uuid_mod.uuid4().hex[:8]
        return self.sb.boot(name, vcpus=vcpus, metadata=metadata(pct),
                            cputune=cputune, program='idle')

    def run_agent(self):
        """Run the daemon loop in a thread until the test ends."""
        # A real thread: this test process may run under eventlet.
        threading = concurrency.native('threading')
        stop = threading.Event()
        thread = threading.Thread(target=self.agent.run, args=(stop,),
                                  daemon=True)
        thread.start()

        def halt():
            stop.set()
            thread.join(10)
        self.addCleanup(halt)

    def tasks(self, group=None, mon=None):
        parts = [self.resctrl.root] + ([group] if group else [])
        if mon:
            parts += ['mon_groups', mon]
        with open(os.path.join(*(parts + ['tasks']))) as f:
            return {int(t) for t in f.read().split()}

    def placed(self, dom, group, mon=True):
        """True if every vCPU of ``dom`` is in group (and its mon group)."""
        tids = set(guest.vcpu_thread_ids(dom))
        try:
            if group is not None and not tids <= self.tasks(group):
                return False
            if mon:
                return tids <= self.tasks(group, P + 'm-' + dom.UUIDString())
        except OSError:
            return False
        return True

    def mark(self):
        entries = self.control.log()
        self.seq = entries[-1]['seq'] if entries else 0

    def mutations(self):
        return [e for e in self.control.log(self.seq)
                if e['op'] in MUTATIONS]

    def groups(self):
        return sorted(n for n in os.listdir(self.resctrl.root)
                      if n not in ('info', 'mon_groups', 'mon_data') and
                      os.path.isdir(os.path.join(self.resctrl.root, n)))


class TestLibvirt(LibvirtAgentTestCase):

    def test_converges_from_cold_start(self):
        self.agent.tick()               # the default group's ways first
        a = self.boot(10)
        b = self.boot(10)
        c = self.boot(20, vcpus=1)
        d = self.boot()
        e = self.boot(cputune=(
            "<cachetune vcpus='0-1'><cache id='0' level='3' type='both' "
            "size='3328' unit='KiB'/><monitor level='3' vcpus='0-1'/>"
            "</cachetune>"))
        self.agent.tick()
        self.assertTrue(self.placed(a, P + 'mb10'))
        self.assertTrue(self.placed(b, P + 'mb10'))
        self.assertTrue(self.placed(c, P + 'mb20'))
        self.assertTrue(self.placed(d, None))
        lv = 'qemu-%d-%s-vcpus_0-1' % (e.ID(), e.name())
        self.assertTrue(self.placed(e, lv, mon=False))
        self.assertEqual(sorted([lv, P + 'mb10', P + 'mb20']),
                         self.groups())
        self.mark()
        for _ in range(3):
            self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations())
        doc = self.agent.sample()
        self.assertEqual(5, doc['host']['instances'])
        self.assertEqual('%s/%s' % (P + 'mb10', P + 'm-' + a.UUIDString()),
                         doc['instances'][a.UUIDString()]['counters'])
        self.assertEqual(lv, doc['instances'][e.UUIDString()]['counters'])

    def test_event_fast_path(self):
        # Ticks far apart: only the event can place the domain in time.
        self.flags(tick_interval=60.0, group='rdt_agent')
        self.agent = agent_cmd.build_agent(CONF)
        self.run_agent()
        wait(lambda: self.agent.last_tick.wall, what='the first tick')
        dom = self.boot(30, vcpus=4)
        t0 = time.monotonic()
        wait(lambda: self.placed(dom, P + 'mb30'), 5, 'placement')
        # Well before the next tick would have done it.
        self.assertLess(time.monotonic() - t0, 1.0)
        # The agent's thread records the latency after its last write,
        # which the placement above may have been seen before.
        wait(lambda: self.agent.event_latencies, 5, 'the event latency')
        dom.destroy()
        wait(lambda: self.groups() == [], 5, 'cleanup')

    def test_libvirtd_restart(self):
        self.run_agent()
        a = self.boot(10)
        wait(lambda: self.placed(a, P + 'mb10'), 5, 'placement')
        pid = self.sb.sandbox.pid
        enter = ['nsenter', '--target', str(pid), '--mount', '--']
        # Stop it and wait until it is gone (it holds its pid file).
        subprocess.check_call(enter + [
            'sh', '-c', 'p=$(cat /run/libvirt/libvirtd.pid); kill $p; '
            'while kill -0 $p 2>/dev/null; do sleep 0.05; done'])
        wait(lambda: not self.agent.source.connected, 10, 'disconnect')
        subprocess.check_call(enter + namespace.LIBVIRTD)
        wait(lambda: self.agent.source.connected, 20, 'reconnect')
        import libvirt
        self.sb.conn = libvirt.open(self.sb.sandbox.uri)
        self.addCleanup(self.sb.conn.close)
        b = self.boot(20)
        wait(lambda: self.placed(b, P + 'mb20'), 10, 'placement')
        a = self.sb.conn.lookupByUUIDString(a.UUIDString())
        self.assertTrue(self.placed(a, P + 'mb10'))

    def test_remount_restores_libvirt_and_agent_groups(self):
        self.agent.tick()
        a = self.boot(10)
        e = self.boot(cputune=(
            "<cachetune vcpus='0-1'><cache id='0' level='3' type='both' "
            "size='3328' unit='KiB'/><cache id='1' level='3' type='both' "
            "size='3328' unit='KiB'/></cachetune><memorytune vcpus='0-1'>"
            "<node id='0' bandwidth='50'/><node id='1' bandwidth='50'/>"
            "</memorytune>"))
        lv = 'qemu-%d-%s-vcpus_0-1' % (e.ID(), e.name())
        self.agent.tick()
        self.control.remount()
        self.assertEqual([], self.groups())
        self.agent.tick()
        self.assertTrue(self.placed(a, P + 'mb10'))
        self.assertTrue(self.placed(e, lv, mon=False))
        with open(os.path.join(self.resctrl.root, lv, 'schemata')) as f:
            text = f.read().replace(' ', '')
        self.assertIn('MB:0=50;1=50', text)
        self.assertNotIn('L3:0=7ff', text)
        # libvirt removes the restored group when the guest goes.
        e.destroy()
        a.destroy()
        self.agent.tick()
        self.assertEqual([], self.groups())

    def test_create_destroy_cycles(self):
        self.run_agent()
        for i in range(20):
            dom = self.boot((10, 20)[i % 2])
            wait(lambda: self.placed(dom, P + 'mb%d' % (10, 20)[i % 2]), 5,
                 'placement of guest %d' % i)
            dom.destroy()
        wait(lambda: self.groups() == [], 5, 'cleanup')
        self.assertEqual([], os.listdir(os.path.join(self.resctrl.root,
                                                     'mon_groups')))


class TestReadOnlyLibvirt(LibvirtAgentTestCase):
    """The agent needs no more of libvirt than its read-only socket."""

    def test_agent_works_through_the_read_only_socket(self):
        import libvirt
        ro = self.sb.sandbox.paths.libvirt_socket + '-ro'
        self.assertTrue(os.path.exists(ro))
        self.flags(libvirt_uri='qemu:///system?socket=%s' % ro,
                   group='rdt_agent')
        self.agent = agent_cmd.build_agent(CONF)
        self.run_agent()
        wait(lambda: self.agent.last_tick.wall, what='the first tick')
        a = self.boot(10)
        # The start event reaches the agent on this connection.
        wait(lambda: self.placed(a, P + 'mb10'), 5, 'placement')
        wait(lambda: self.agent.event_latencies, 5, 'an event')
        own = self.agent.source._conn.lookupByUUIDString(a.UUIDString())
        e = self.assertRaises(libvirt.libvirtError, own.suspend)
        self.assertEqual(libvirt.VIR_ERR_OPERATION_DENIED,
                         e.get_error_code())
        a.destroy()
        wait(lambda: self.groups() == [], 5, 'cleanup')

    def test_connection_is_read_only_on_the_full_socket(self):
        import libvirt
        source = domains.LibvirtSource(self.sb.sandbox.uri)
        source.connect()
        self.addCleanup(source.disconnect)
        a = self.boot(10)
        self.assertIn(a.UUIDString(), source.instances())
        own = source._conn.lookupByUUIDString(a.UUIDString())
        for write in (own.suspend, own.destroy):
            e = self.assertRaises(libvirt.libvirtError, write)
            self.assertEqual(libvirt.VIR_ERR_OPERATION_DENIED,
                             e.get_error_code())
        self.assertTrue(a.isActive())


# The agent as an unprivileged user: the privileged daemon is forked while
# still root (as sudo privsep-helper would start it), then the agent
# drops to a uid with no groups, the libvirt group included.
AGENT_AS_USER = '''
import os, sys
from oslo_privsep import priv_context
from rdt_virt.cmd import agent as agent_cmd
from rdt_virt import conf
from rdt_virt import privsep
conf.CONF(['--config-file', sys.argv[1]], project='rdt-virt')
privsep.sys_admin_pctxt.start(priv_context.Method.FORK)
uid = int(sys.argv[2])
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)
try:
    with open(os.path.join(conf.CONF.rdt.resctrl_root, 'schemata'), 'w') as f:
        f.write('MB:0=50\\n')
except PermissionError:
    print('DIRECT-WRITE-REFUSED')
agent = agent_cmd.build_agent(conf.CONF)
print('WRITES', agent.tick().writes)
print('WRITES', agent.tick().writes)
doc = agent.sample()
print('INSTANCES', doc['host']['instances'])
'''


class TestUnprivilegedAgent(LibvirtAgentTestCase):
    """The agent's own process needs no privilege besides its daemon."""

    def test_agent_as_unprivileged_user(self):
        import pwd
        import sys
        sb = self.sb.sandbox
        # libvirtd wants a user record for its client's uid: one that
        # every host has, in no group.
        uid = pwd.getpwnam('nobody').pw_uid
        # Let the user reach the sandbox's sockets, pid files and resctrl.
        os.chmod(self.sb.dir, 0o755)
        home = os.path.join(self.sb.dir, 'agent')
        os.mkdir(home)
        os.chown(home, uid, uid)
        conf_file = os.path.join(home, 'rdt-virt.conf')
        with open(conf_file, 'w') as f:
            f.write('[rdt]\nresctrl_root = %s\nstate_file = %s\n'
                    'default_group_l3_ways = 8\n[rdt_agent]\n'
                    'libvirt_uri = qemu:///system?socket=%s-ro\n'
                    'qemu_pid_dir = %s\nprometheus_port = 0\n'
                    'retry_interval = 0\n' % (
                        sb.resctrl_root, os.path.join(home, 'state.json'),
                        sb.paths.libvirt_socket,
                        os.path.join(sb.paths.private('/run/libvirt'),
                                     'qemu')))
        a = self.boot(10)
        b = self.boot(20, vcpus=1)
        repo = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))
        proc = subprocess.run(
            [sys.executable, '-c', AGENT_AS_USER, conf_file, str(uid)],
            cwd=repo, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=repo))
        self.assertEqual(0, proc.returncode, proc.stdout)
        lines = [line for line in proc.stdout.splitlines()
                 if line.split(' ')[0] in ('DIRECT-WRITE-REFUSED', 'WRITES',
                                           'INSTANCES')]
        self.assertEqual('DIRECT-WRITE-REFUSED', lines[0], proc.stdout)
        self.assertNotEqual('WRITES 0', lines[1], proc.stdout)
        self.assertEqual(['WRITES 0', 'INSTANCES 2'], lines[2:],
                         proc.stdout)
        self.assertTrue(self.placed(a, P + 'mb10'))
        self.assertTrue(self.placed(b, P + 'mb20'))
        self.assertEqual(uid, os.stat(
            os.path.join(home, 'state.json')).st_uid)
