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

"""Base classes and helpers shared by the unit and functional tests."""

import ctypes.util
import os
import shutil

import fixtures
from oslo_config import fixture as config_fixture
import testtools

from rdt_virt import conf as rdt_conf

FIXTURES_DIR = os.path.join(os.path.dirname(__file__), 'fixtures')


def in_ci():
    """True when running under CI, where prerequisites must not skip."""
    return os.environ.get('CI', '').lower() in ('1', 'true', 'yes')


class TestCase(testtools.TestCase):
    """Base test case: isolated config, temporary directories, logging."""

    def setUp(self):
        super().setUp()
        self.conf_fixture = self.useFixture(
            config_fixture.Config(rdt_conf.CONF))
        self.useFixture(fixtures.NestedTempfile())
        self.useFixture(fixtures.FakeLogger(level=10, format='%(message)s'))

    def flags(self, group=None, **kw):
        """Override config options for the duration of the test."""
        self.conf_fixture.config(group=group, **kw)

    def require(self, condition, reason):
        """Skip when a prerequisite is missing; fail instead under CI.

        Tests of the emulated host need root, /dev/fuse, /dev/kvm and
        libvirtd. A developer without them gets a clear skip; CI installs
        them all, so a missing one there is a failure, not a skip.
        """
        if condition:
            return
        if in_ci():
            self.fail('missing prerequisite in CI: %s' % reason)
        self.skipTest(reason)

    def require_fuse(self):
        """:meth:`require` what mounting the emulated resctrl needs."""
        self.require(os.geteuid() == 0, 'the FUSE mount needs root')
        self.require(os.path.exists('/dev/fuse'), '/dev/fuse is missing')
        self.require(ctypes.util.find_library('fuse3'),
                     'libfuse3 is not installed')
        self.require(shutil.which('fusermount3') or shutil.which('umount'),
                     'fusermount3 is not installed')
