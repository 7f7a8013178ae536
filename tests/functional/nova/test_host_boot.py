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

"""A host reboot with ``resume_guests_state_on_host_boot``.

After the reboot nova-compute starts again and restarts the instances that
ran; resctrl may not be mounted yet, and once it is, the default group owns
every L3 way until rdt-virt-agent shrinks it to ``[rdt]
default_group_l3_ways``. libvirt (here fakelibvirt's domains) cannot give a
cache allocation ways the default group holds.
"""

import os
import shutil
import threading

import fixtures

from rdt_virt.resctrl import fs
from rdt_virt.resctrl import schemata
from tests.functional.nova import base

CACHE = {'hw:cache_l3': '4096'}
# The reference tree's L3 after a mount, and with 4 ways reserved for the
# default group (the lowest 4; the hardware-shared ways 9-10 are not
# contiguous with them).
MOUNTED = 'L3:0=7ff;1=7ff\n'
RESERVED = 'L3:0=00f;1=00f\n'


# Bytes of one L3 way (36608 KiB in 11 ways).
WAY = 3407872


def _replace_l3(name, line):
    with open(name) as f:
        lines = [x for x in f if not x.strip().startswith('L3:')]
    with open(name, 'w') as f:
        f.write(''.join(lines) + line)


def _sizes(tree):
    """Make the default group's ``size`` follow its L3 masks.

    The kernel computes ``size`` from the schemata; a plain tree needs
    this after every write to the schemata.
    """
    with open(os.path.join(tree, 'schemata')) as f:
        l3 = [x.strip() for x in f if x.strip().startswith('L3:')]
    ways = [(dom, bin(int(mask, 16)).count('1')) for dom, mask in (
        part.split('=') for part in l3[0][3:].split(';'))]
    _replace_l3(os.path.join(tree, 'size'), 'L3:%s\n' % ';'.join(
        '%s=%d' % (dom, n * WAY) for dom, n in ways))


def _default_l3(tree, l3):
    """Set the default group's L3 masks (and the sizes resctrl shows)."""
    _replace_l3(os.path.join(tree, 'schemata'), l3)
    _sizes(tree)


def _after_agent(tree):
    """A tree as the agent leaves it after a mount.

    No groups; the default group keeps its reserved ways.
    """
    for name in os.listdir(tree):
        if os.path.exists(os.path.join(tree, name, 'schemata')):
            shutil.rmtree(os.path.join(tree, name))
    _default_l3(tree, RESERVED)


class RDTHostBootTest(base.RDTServersTestBase):

    def setUp(self):
        super().setUp()
        # The kernel merges a partial schemata write into the group's
        # schemata and computes the default group's size from it; a plain
        # tree does neither.
        write = fs.Resctrl.write_schemata

        def write_schemata(resctrl, group, update):
            if isinstance(update, str):
                update = schemata.parse(update)
            merged = resctrl.read_schemata(group)
            for res, doms in update.items():
                merged.setdefault(res, {}).update(doms)
            write(resctrl, group, merged)
            if group is None:
                _sizes(resctrl.root)

        self.useFixture(fixtures.MonkeyPatch(
            'rdt_virt.resctrl.fs.Resctrl.write_schemata', write_schemata))
        self.flags(resume_guests_state_on_host_boot=True)
        self.flags(default_group_l3_ways=4, host_ready_timeout=20,
                   group='rdt')
        self.start_rdt_compute('a', prepare=_after_agent)
        self.server = self.boot(self.flavor(CACHE))
        self.assertEqual(1, len(self.libvirt_groups('a')))

    def reboot_host(self, mount_after, reserve_after):
        """Power the host off, then start nova-compute again.

        resctrl is mounted ``mount_after`` seconds into nova-compute's
        start, and the agent reserves the ways ``reserve_after`` seconds
        in (None: never).
        """
        self.computes['a'].stop()
        conn = self.driver('a')._host.get_connection()
        conn.lookupByUUIDString(self.server['id']).destroy()
        self.assertEqual([], self.libvirt_groups('a'))
        tree = self.roots['a']
        os.rename(tree, tree + '.off')
        os.mkdir(tree)

        def mount():
            os.rmdir(tree)
            os.rename(tree + '.off', tree)
            _default_l3(tree, MOUNTED)

        timers = [threading.Timer(mount_after, mount)]
        if reserve_after is not None:
            timers.append(threading.Timer(
                reserve_after, _default_l3, (tree, RESERVED)))
        for timer in timers:
            timer.start()
            self.addCleanup(timer.cancel)
        self.restart_rdt_compute('a')
        for timer in timers:
            timer.join()

    def check_resumed(self):
        server = self._wait_for_server_parameter(
            self.server, {'status': 'ACTIVE', 'OS-EXT-STS:task_state': None})
        self.assertEqual({server['id']}, set(self.claims('a')))
        self.assertEqual(1, len(self.libvirt_groups('a')))

    def test_waits_for_the_mount_and_the_agent(self):
        self.reboot_host(mount_after=1.0, reserve_after=2.0)
        self.check_resumed()

    def test_reserves_the_ways_when_the_agent_does_not(self):
        self.flags(host_ready_timeout=3, group='rdt')
        self.reboot_host(mount_after=1.0, reserve_after=None)
        self.check_resumed()
        with open(os.path.join(self.roots['a'], 'schemata')) as f:
            self.assertEqual({0: 0xf, 1: 0xf},
                             schemata.parse(f.read())['L3'])


class RDTHostBootNova31MetadataTest(RDTHostBootTest):
    """The same with the domain metadata Nova 31 writes.

    It records no extra specs: the driver reads them from the instance's
    record (``nova_plugin.compat``), on every Nova release.
    """

    def setUp(self):
        self.useFixture(fixtures.MockPatchObject(
            base.RDTConnection, 'rdt_extra_specs_in_metadata', False))
        super().setUp()
