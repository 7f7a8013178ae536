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

"""Test helpers around the sandbox: an emulated RDT host with libvirtd."""

import os
import shutil
import tempfile

import fixtures

from rdt_virt.resctrl import fs
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import launcher
from tests import base
from tests.functional import matrix

# libvirt's QEMU capability cache, kept across sandboxes and test runs: the
# first probe of QEMU takes 5-8 s, later sandboxes start in about a second.
CACHE_DIR = '/var/tmp/rdt-virt-tests/libvirt-cache'


class SandboxFixture(fixtures.Fixture):
    """A running sandbox with a libvirt connection and a boot image.

    :ivar sandbox: the :class:`~rdt_virt.sandbox.Sandbox`.
    :ivar conn: a libvirt connection to its libvirtd.
    :ivar resctrl: :class:`~rdt_virt.resctrl.fs.Resctrl` on its emulated
        resctrl, reached from outside the namespace.
    """

    def __init__(self, profile='reference', kernel=None):
        super().__init__()
        self.profile = profile
        self.kernel = kernel or matrix.default_kernel()

    def _setUp(self):
        import libvirt

        # Short: libvirt's socket path must fit in sun_path (108 bytes).
        self.dir = tempfile.mkdtemp(prefix='rdtsb-', dir='/tmp')
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.sandbox = launcher.Sandbox(self.dir, self.profile, CACHE_DIR,
                                        kernel=self.kernel)
        self.addCleanup(self.sandbox.stop)
        self.sandbox.start()
        self.conn = libvirt.open(self.sandbox.uri)
        self.addCleanup(self.conn.close)
        self.resctrl = fs.Resctrl(self.sandbox.resctrl_root)
        self.images = {}

    def image(self, program='burn'):
        if program not in self.images:
            self.images[program] = guest.write_image(
                os.path.join(self.dir, '%s.img' % program), program)
        return self.images[program]

    def boot(self, name, vcpus=1, cputune='', metadata='', program='burn',
             uuid=None):
        """Start a transient tiny guest; it is destroyed at cleanup."""
        import libvirt

        dom = self.conn.createXML(guest.domain_xml(
            name, self.image(program), vcpus=vcpus, uuid=uuid,
            cputune=cputune, metadata=metadata))

        def destroy():
            try:
                dom.destroy()
            except libvirt.libvirtError:
                pass
        self.addCleanup(destroy)
        return dom


def sandbox_prerequisites():
    """``(met, why not)`` for a sandbox: its launcher's and libvirt-python."""
    reasons = launcher.missing_prerequisites()
    try:
        import libvirt  # noqa: F401
    except ImportError:
        reasons.append('libvirt-python is not installed')
    return not reasons, '; '.join(reasons)


class SandboxTestCase(base.TestCase):
    """Tests on a fresh sandbox of ``PROFILE`` and ``KERNEL`` each.

    Scenarios from :func:`tests.functional.matrix.scenarios` set the
    lower-case ``profile`` and ``kernel``, which take precedence.
    """

    PROFILE = 'reference'
    #: Kernel spec; None: ``RDT_VIRT_TEST_KERNEL`` or the newest release.
    KERNEL = None

    def setUp(self):
        super().setUp()
        self.require(*sandbox_prerequisites())
        self.sb = self.useFixture(SandboxFixture(
            getattr(self, 'profile', self.PROFILE),
            getattr(self, 'kernel', self.KERNEL)))
        self.conn = self.sb.conn
        self.resctrl = self.sb.resctrl
