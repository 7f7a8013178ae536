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

"""Profiles as captured trees: capture, render and load round trips."""

import json
import os

from rdt_virt.emulator import boot
from rdt_virt.emulator import fromtree
from rdt_virt.emulator import profiles
from rdt_virt.resctrl import capture
from tests import base
from tests.unit.emulator import fakes

FIELDS = ('vendor', 'domains', 'l3', 'mb', 'smba', 'mon', 'cdp',
          'mba_mbps', 'geometry', 'cpu', 'cmdline', 'snc_ways', 'telemetry',
          'arch')


class RoundTripTest(base.TestCase):

    def tmp(self):
        return self.useFixture(base.fixtures.TempDir()).path

    def test_builtin_profiles_round_trip(self):
        for name, profile in sorted(profiles.PROFILES.items()):
            path = os.path.join(self.tmp(), name)
            fromtree.render(profile, path)
            loaded = fromtree.load(path)
            want, got = boot.apply(profile), boot.apply(loaded)
            for field in FIELDS:
                self.assertEqual(getattr(want, field), getattr(got, field),
                                 '%s: %s' % (name, field))
            self.assertEqual(name, loaded.name)

    def test_older_kernel_capture(self):
        # 6.1 shows no sparse_masks and no counter assignment files.
        path = self.tmp()
        fromtree.render('amd-zen5', path, kernel='6.1')
        loaded = fromtree.load(path, name='old-zen5')
        self.assertEqual('old-zen5', loaded.name)
        self.assertTrue(loaded.l3.sparse_masks)       # AMD always has them
        self.assertIsNone(loaded.mon.num_mbm_cntrs)

    def test_writable_values_served_as_captured(self):
        path = self.tmp()
        fromtree.render('amd', path)
        name = os.path.join(path, 'resctrl', 'info', 'L3_MON',
                            'max_threshold_occupancy')
        for captured in ('4096', '229376'):
            with open(name, 'w') as f:
                f.write(captured + '\n')
            loaded = fromtree.load(path)
            model = fakes.model.ResctrlModel(loaded, fakes.FakeThreads())
            tree = fakes.tree.ResctrlTree(model)
            self.assertEqual(captured + '\n', tree.read(
                '/info/L3_MON/max_threshold_occupancy'))

    def test_not_a_capture(self):
        self.assertRaises(fromtree.TreeError, fromtree.load, self.tmp())


class CaptureTest(fakes.ModelTestCase):
    """capture() of a directory laid out like the real host's."""

    def test_capture_then_load(self):
        tmp = self.useFixture(base.fixtures.TempDir()).path
        # A "real" host: a rendered AMD host's resctrl and sysfs, plus
        # /proc files, at the paths capture() reads.
        src = os.path.join(tmp, 'src')
        fromtree.render('amd', src)
        proc = os.path.join(tmp, 'proc')
        os.makedirs(proc)
        with open(os.path.join(proc, 'cpuinfo'), 'w') as f:
            f.write('processor\t: 0\nvendor_id\t: AuthenticAMD\n'
                    'cpu family\t: 25\nmodel\t\t: 17\nstepping\t: 1\n'
                    'flags\t\t: cat_l3 cqm_occup_llc\n\n')
        with open(os.path.join(proc, 'cmdline'), 'w') as f:
            f.write('ro quiet\n')
        with open(os.path.join(proc, 'mounts'), 'w') as f:
            f.write('resctrl %s resctrl rw,relatime,debug 0 0\n'
                    % os.path.join(src, 'resctrl'))
        dest = os.path.join(tmp, 'capture')
        count = capture.capture(dest, os.path.join(src, 'resctrl'),
                                os.path.join(src, 'cpu'), proc)
        self.assertGreater(count, 40)
        with open(os.path.join(dest, 'host.json')) as f:
            host = json.load(f)
        self.assertEqual(('AuthenticAMD', 25, 17, 1, 'ro quiet', ['debug']),
                         (host['vendor'], host['family'], host['model'],
                          host['stepping'], host['cmdline'],
                          host['mount_options']))
        self.assertTrue(os.path.exists(os.path.join(
            dest, 'resctrl', 'mon_data', 'mon_L3_01', 'mbm_total_bytes')))
        self.assertTrue(os.path.exists(os.path.join(
            dest, 'cpu', 'cpu3', 'cache', 'index3', 'shared_cpu_list')))
        loaded = fromtree.load(dest)
        amd = profiles.AMD
        self.assertEqual((amd.l3.cbm_len, amd.mb, amd.smba, amd.domains),
                         (loaded.l3.cbm_len, loaded.mb, loaded.smba,
                          loaded.domains))
        # The emulator serves exactly that host.
        model = self.make_model(loaded)
        tree = fakes.tree.ResctrlTree(model)
        with open(os.path.join(src, 'resctrl', 'schemata')) as f:
            self.assertEqual(f.read(), tree.read('/schemata'))
