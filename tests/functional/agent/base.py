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

"""The agent on an emulated host: a real FUSE resctrl, fake QEMUs.

The agent runs for real (reconciliation, executor, privileged entrypoints
in-process, sampler) against the emulator's FUSE mount; only libvirt and
the QEMU processes are stand-ins (:mod:`tests.functional.agent.fakeqemu`),
with real threads the emulated kernel can move between groups.
"""

import logging
import os
import uuid as uuid_mod

import fixtures

from rdt_virt.agent import model
from rdt_virt.agent import state
from rdt_virt.cmd import agent as agent_cmd
from rdt_virt import conf as rdt_conf
from rdt_virt import privsep
from rdt_virt.resctrl import schemata as schemata_mod
from tests.functional.agent import fakeqemu
from tests.functional.emulator import base as emu_base

CONF = rdt_conf.CONF
PREFIX = 'rdtvirt-'
MUTATIONS = ('write', 'mkdir', 'rmdir', 'rename')


def shared(pct):
    return model.BandwidthPolicy('percent', pct, pct, model.SHARED)


def own(value, unit='MBps'):
    return model.BandwidthPolicy(unit, value, value, model.INSTANCE)


class AgentTestCase(emu_base.EmulatorTestCase):
    """An agent, an emulated resctrl, fake QEMUs and a fake libvirt."""

    def setUp(self):
        super().setUp()
        self.logger = self.useFixture(fixtures.FakeLogger(
            level=logging.INFO, format='%(levelname)s %(message)s'))
        privsep.sys_admin_pctxt.set_client_mode(False)
        self.addCleanup(privsep.sys_admin_pctxt.set_client_mode, True)
        tmp = self.useFixture(fixtures.TempDir()).path
        self.state_file = os.path.join(tmp, 'state.json')
        self.flags(resctrl_root=self.root, state_file=self.state_file,
                   kernel_release_file=self.emulator.handle.osrelease,
                   group='rdt')
        self.flags(proc_root=os.path.join(tmp, 'proc'), qemu_pid_dir=None,
                   retry_interval=0.0, sample_interval=1.0,
                   prometheus_port=0, group='rdt_agent')
        self.host = fakeqemu.FakeHost(os.path.join(tmp, 'proc'))
        self.addCleanup(self.host.close)
        self.source = fakeqemu.FakeSource()
        self.agent = self.new_agent()
        self.ids = 0

    def new_agent(self):
        return agent_cmd.build_agent(CONF, source=self.source)

    # Guests -------------------------------------------------------------

    def boot(self, bw=None, monitor=True, vcpus=2, others=1, allocs=(),
             event=False, uuid=None):
        """Start a fake instance; returns its uuid."""
        uuid = uuid or str(uuid_mod.uuid4())
        self.ids += 1
        threads = self.host.start(uuid, vcpus=vcpus, others=others)
        inst = model.Instance(uuid, 'instance-%08x' % self.ids, self.ids,
                              allocations=tuple(allocs), bandwidth=bw,
                              monitor=monitor)
        self.source.start(inst, event=event)
        self.threads = threads
        return uuid

    def destroy(self, uuid, event=False):
        self.source.stop(uuid, event=event)
        self.host.stop(uuid)

    def drain(self):
        """Handle the queued libvirt events, as the daemon loop would."""
        while not self.source.events.empty():
            self.agent.handle(self.source.events.get())
        if self.agent.full_requested:
            self.agent.tick()

    # resctrl ------------------------------------------------------------

    def mark(self):
        entries = self.client.log()
        return entries[-1]['seq'] if entries else 0

    def mutations(self, since):
        return [e for e in self.client.log(since)
                if e['op'] in MUTATIONS]

    def groups(self):
        return sorted(n for n in os.listdir(self.root)
                      if n not in ('info', 'mon_groups', 'mon_data') and
                      os.path.isdir(self.path(n)))

    def schemata(self, group=None):
        """A group's schemata, parsed (kernels before 6.15 pad values)."""
        return schemata_mod.parse(self.read(*([group] if group else []) +
                                            ['schemata']))

    def mon_groups(self, group=None):
        return sorted(os.listdir(self.path(*([group] if group else []),
                                           'mon_groups')))

    def tasks(self, group=None, mon=None):
        parts = [group] if group else []
        if mon:
            parts += ['mon_groups', mon]
        return {int(t) for t in self.read(*(parts + ['tasks'])).split()}

    def location(self, tid):
        """(control group, monitoring group) of a thread."""
        for group in [None] + self.groups():
            for mon in self.mon_groups(group):
                if tid in self.tasks(group, mon):
                    return (group, mon)
        for group in self.groups():
            if tid in self.tasks(group):
                return (group, None)
        return (None, None)

    def assertPlaced(self, uuid, group, mon=True, extras=False):
        mon_name = PREFIX + 'm-' + uuid if mon is True else mon
        tids = (self.host.tids(uuid) if extras
                else self.host.vcpu_tids(uuid))
        for tid in tids:
            self.assertEqual((group, mon_name), self.location(tid),
                             'thread %d of %s' % (tid, uuid))

    def state(self):
        return state.read(self.state_file)
