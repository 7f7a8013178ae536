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

"""Emulating a captured host reads back the capture, byte for byte.

For every resctrl tree the project has (``tests/fixtures/captures`` and
``tests/fixtures/resctrl``) and for every built-in profile rendered as a
capture, the emulator is built from the tree as ``rdt-virt-emulator mount
--from-tree`` builds it, on a machine with two CPUs (like the CI hosts, and
fewer than most captured hosts have domains), and must show the same
``info/`` files, root ``schemata``, ``mode`` and ``size``, and the same
``mon_data`` layout. Counter values and CPU masks are this machine's.
"""

import os

import testscenarios

from rdt_virt.emulator import fromtree
from rdt_virt.emulator import kparse
from rdt_virt.emulator import model
from rdt_virt.emulator import profiles
from rdt_virt.emulator import tree as tree_mod
from tests import base
from tests.unit.emulator import fakes

CAPTURES = os.path.join(base.FIXTURES_DIR, 'captures')
TREES = os.path.join(base.FIXTURES_DIR, 'resctrl')
ROOT_FILES = ('schemata', 'size', 'mode')


def _resctrl_dir(path):
    sub = os.path.join(path, 'resctrl')
    return sub if os.path.isdir(os.path.join(sub, 'info')) else path


def _files(res, rel):
    out = {}
    for dirpath, dirs, names in os.walk(os.path.join(res, rel)):
        dirs.sort()
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path) as f:
                out[os.path.relpath(path, res)] = f.read()
    return out


def _groups(res):
    """Control groups in a full tree (captures hold none)."""
    return [n for n in os.listdir(res)
            if os.path.isfile(os.path.join(res, n, 'schemata'))]


def _trees():
    out = []
    for parent in (CAPTURES, TREES):
        for name in sorted(os.listdir(parent)):
            path = os.path.join(parent, name)
            if os.path.isdir(os.path.join(_resctrl_dir(path), 'info')):
                out.append(('%s/%s' % (os.path.basename(parent), name),
                            {'path': path}))
    return out


class _Reader(object):
    """Reads an emulated tree the way the capture tool reads a host."""

    def __init__(self, directory, cpus=(0, 1)):
        self.profile = fromtree.load(directory)
        self.kernel, _ = fromtree.guess_kernel(directory)
        self.model = model.ResctrlModel(
            self.profile, fakes.FakeThreads(), online_cpus=cpus,
            kernel=self.kernel)
        self.tree = tree_mod.ResctrlTree(self.model)

    def files(self, path):
        out = {}
        for name, kind in self.tree.readdir_modes(path):
            child = path.rstrip('/') + '/' + name
            if kind & 0o040000:
                out.update(self.files(child))
            else:
                try:
                    out[child.lstrip('/')] = self.tree.read(child)
                except kparse.KernelError:
                    # Unreadable (io_alloc_cbm while io_alloc is off): the
                    # capture tool skips such files too.
                    pass
        return out

    def root(self):
        return {n: self.tree.read('/' + n) for n in ROOT_FILES
                if n in self.tree.readdir('/')}

    def mon_layout(self):
        if not self.profile.mon_capable:
            return []
        return sorted(self.files('/mon_data'))


class _RoundTrip(object):

    def check(self, directory):
        res = _resctrl_dir(directory)
        emulated = _Reader(directory)
        want = _files(res, 'info')
        got = emulated.files('/info')
        if _groups(res):
            # bit_usage also shows the groups of a full tree, which a
            # capture does not reproduce: compare its domain ids only.
            for name in [n for n in want if n.endswith('/bit_usage')]:
                self.assertEqual(_ids(want.pop(name)),
                                 _ids(got.pop(name)), name)
        self.assertEqual(sorted(want), sorted(got))
        for name in want:
            self.assertEqual(want[name], got[name], name)
        want_root = {}
        for name in ROOT_FILES:
            if os.path.exists(os.path.join(res, name)):
                with open(os.path.join(res, name)) as f:
                    want_root[name] = f.read()
        self.assertEqual(want_root, emulated.root())
        self.assertEqual(
            sorted(os.path.relpath(p, 'mon_data') for p in
                   _files(res, 'mon_data')),
            [os.path.relpath(p, 'mon_data') for p in emulated.mon_layout()])
        return emulated


def _ids(text):
    return [item.partition('=')[0] for item in text.strip().split(';')]


class CaptureRoundTripTest(testscenarios.WithScenarios, base.TestCase,
                           _RoundTrip):

    scenarios = _trees()

    def test_reads_back_as_captured(self):
        self.check(self.path)


class ProfileRoundTripTest(testscenarios.WithScenarios, base.TestCase,
                           _RoundTrip):
    """Every built-in profile, captured from its own emulation."""

    scenarios = [(name, {'profile': name})
                 for name in sorted(profiles.PROFILES)]

    def test_reads_back_as_rendered(self):
        path = self.useFixture(base.fixtures.TempDir()).path
        fromtree.render(self.profile, path)
        self.check(path)


class CapturedHostTest(base.TestCase):
    """What the two captures of real hosts must reproduce."""

    def test_amd_epyc_eight_domains(self):
        emulated = _Reader(os.path.join(CAPTURES, 'epyc-9354-8ccd'))
        ids = '0,2,4,6,8,10,12,14'
        self.assertEqual(('amd', ids), (
            emulated.profile.vendor,
            ','.join(str(d.id) for d in emulated.profile.domains)))
        text = emulated.tree.read('/schemata')
        self.assertIn('  MB:' + ';'.join(
            '%s=2048' % d for d in ids.split(',')) + '\n', text)
        self.assertIn('SMBA:0=2048;2=2048;', text)
        self.assertEqual(8, len(emulated.tree.read(
            '/info/L3_MON/mbm_total_bytes_config').split(';')))
        # Unthrottled is AMD's 2048 units, throttling takes units.
        emulated.tree.mkdir('/g1')
        emulated.tree.write('/g1/schemata', 'MB:14=256\n')
        # (6.12 pads the value to the column: "14= 256".)
        self.assertIn('MB:0=2048;2=2048;4=2048;6=2048;8=2048;10=2048;'
                      '12=2048;14=256', emulated.tree.read(
                          '/g1/schemata').replace(' ', ''))

    def test_intel_mba_mbps_l2_domains(self):
        emulated = _Reader(os.path.join(CAPTURES, 'spr-4410y-mba-mbps'))
        self.assertTrue(emulated.profile.mba_mbps)
        l2 = list(range(12)) + list(range(64, 76))
        self.assertEqual(l2, list(emulated.model.ctrl_domains['L2']))
        emulated.tree.mkdir('/g1')
        emulated.tree.write('/g1/schemata', 'MB:1=2500\n')
        self.assertIn('    MB:0=4294967295;1=2500\n',
                      emulated.tree.read('/g1/schemata'))
        # The derived CPU topology names the same L2 ids, under socket 1
        # for 64-75, so libvirt and resctrl agree.
        self.assertEqual(((0, tuple(range(12))), (1, tuple(range(64, 76)))),
                         emulated.profile.l2_ids)

    def test_assumptions_are_printed(self):
        path = os.path.join(CAPTURES, 'epyc-9354-8ccd')
        emulated = _Reader(path)
        spec, why = fromtree.guess_kernel(path)
        lines = fromtree.assumptions(emulated.profile,
                                     emulated.model.kernel, why)
        text = '\n'.join(lines)
        self.assertIn('kernel 6.12 (the files show', text)
        self.assertIn('counter unit 64 bytes', text)
        self.assertIn('limbo checked every 1s', text)
        self.assertIn('domains: L3 0,2,4,6,8,10,12,14', text)

    def test_counter_scale_option(self):
        profile = fromtree.load(os.path.join(CAPTURES, 'epyc-9354-8ccd'),
                                mon_scale=4096)
        self.assertEqual(4096, profile.mon.mon_scale)
