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

SETUP_CFG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'setup.cfg')


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
        self.assertTrue(spec.contains(version.Version('34.0.0')))
        self.assertTrue(spec.contains(version.Version('34.9.1')))
        self.assertFalse(spec.contains(version.Version('35.0.0')))
        self.assertFalse(spec.contains(version.Version('35.0.0rc1'),
                                       prereleases=True))

    def test_audit_needs_openstacksdk(self):
        self.assertIn('openstacksdk', extra('audit'))
