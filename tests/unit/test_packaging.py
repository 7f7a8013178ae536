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

import configparser
import os

from packaging import requirements
from packaging import version

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SETUP_CFG = os.path.join(REPO, 'setup.cfg')
CONSTRAINTS = os.path.join(REPO, 'tools', 'constraints')

# The OpenStack releases rdt-virt supports, oldest first, with the major
# versions of the services it plugs into.
RELEASES = {
    '2025.1': {'nova': 31, 'ceilometer': 24, 'python-watcher': 14},
    '2025.2': {'nova': 32, 'ceilometer': 25, 'python-watcher': 15},
    '2026.1': {'nova': 33, 'ceilometer': 26, 'python-watcher': 16},
    '2026.2': {'nova': 34, 'ceilometer': 27, 'python-watcher': 17},
}


def pins(release):
    with open(os.path.join(CONSTRAINTS, release + '.txt')) as f:
        lines = [line.split('#')[0].strip() for line in f]
    reqs = [requirements.Requirement(line) for line in lines if line]
    return {r.name.lower(): version.Version(str(r.specifier)[2:])
            for r in reqs}


def extra(name):
    cfg = configparser.ConfigParser()
    cfg.read(SETUP_CFG)
    lines = [line.split('#')[0].strip()
             for line in cfg['extras'][name].splitlines()]
    reqs = [requirements.Requirement(line) for line in lines if line]
    return {r.name: r for r in reqs}


class TestExtras(base.TestCase):

    def test_nova_is_capped_below_its_next_major_release(self):
        # The driver overrides private methods of Nova's libvirt driver.
        spec = extra('nova')['nova'].specifier
        self.assertTrue(spec.contains(version.Version('31.0.0')))
        self.assertTrue(spec.contains(version.Version('34.0.0')))
        self.assertTrue(spec.contains(version.Version('34.9.1')))
        self.assertFalse(spec.contains(version.Version('35.0.0')))
        self.assertFalse(spec.contains(version.Version('35.0.0rc1'),
                                       prereleases=True))

    def test_audit_needs_openstacksdk(self):
        self.assertIn('openstacksdk', extra('audit'))

    def test_nova_before_the_oldest_release_is_refused(self):
        spec = extra('nova')['nova'].specifier
        self.assertFalse(spec.contains(version.Version('30.3.0')))


class TestReleases(base.TestCase):
    """Each supported release has its pins, and the extras admit them."""

    def test_every_release_has_its_constraints(self):
        # RELEASE.txt, and RELEASE-pyXY.txt for an older Python.
        files = {f[:-4].split('-')[0] for f in os.listdir(CONSTRAINTS)
                 if f.endswith('.txt')}
        self.assertEqual(set(RELEASES), files)

    def test_constraints_pin_the_release_services(self):
        for release, majors in RELEASES.items():
            found = pins(release)
            for name, major in majors.items():
                self.assertEqual(major, found[name].major,
                                 '%s in %s' % (name, release))

    def test_extras_admit_every_release(self):
        allowed = {'nova': extra('nova')['nova'].specifier,
                   'ceilometer': extra('ceilometer')['ceilometer'].specifier,
                   'python-watcher':
                       extra('watcher')['python-watcher'].specifier}
        for release in RELEASES:
            found = pins(release)
            for name, spec in allowed.items():
                self.assertTrue(spec.contains(found[name]),
                                '%s %s of %s' % (name, found[name], release))

    def test_every_release_has_a_tox_target(self):
        tox = configparser.ConfigParser(interpolation=None)
        tox.read(os.path.join(REPO, 'tox.ini'))
        for release in list(RELEASES)[:-1]:
            section = tox['testenv:release-' + release]
            self.assertIn('tools/constraints/%s.txt' % release,
                          section['deps'])
        # The newest release is the default of every other target.
        self.assertIn('tools/constraints/%s.txt' % list(RELEASES)[-1],
                      tox['testenv']['deps'])
