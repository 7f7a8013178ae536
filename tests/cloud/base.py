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

"""The cloud the cloud tests share: one per test class.

:class:`CloudTestCase` brings ``rdt-virt-sandbox cloud`` up once in
``setUpClass`` (its tests skip where the prerequisites or Gnocchi's
environment are missing), gives the tests its
:class:`~rdt_virt.cloud.flow.Flow`, attaches the transcript of each step
and takes the cloud down after the last test. Set
``RDT_VIRT_CLOUD_LOGS`` to a directory to keep the daemons' logs.
"""

import os
import shutil
import tempfile

import testtools

from rdt_virt.cloud import cloud as cloud_mod
from rdt_virt.cloud import flow as flow_mod
from rdt_virt.sandbox import launcher

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))


class CloudTestCase(testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.transcript = []
        cls.skip = launcher.missing_prerequisites()
        gnocchi = os.environ.get('RDT_VIRT_GNOCCHI_BIN') or os.path.join(
            REPO, '.tox', 'gnocchi', 'bin')
        if not os.path.exists(os.path.join(gnocchi, 'gnocchi-metricd')):
            cls.skip.append('Gnocchi is not installed (tox -e gnocchi)')
        if cls.skip:
            return
        # Short: the sandboxes' libvirt sockets live below it.
        cls.dir = tempfile.mkdtemp(prefix='rdt-cloud-', dir='/var/tmp')
        metric_client = os.environ.get(
            'RDT_VIRT_METRIC_CLIENT_BIN') or os.path.join(
            REPO, '.tox', 'metric-client', 'bin')
        cls.cloud = cloud_mod.Cloud(cls.dir, gnocchi_bin=gnocchi,
                                    log=cls.transcript.append,
                                    metric_client_bin=metric_client)
        try:
            cls.cloud.up()
        except BaseException:
            cls.tearDownClass()
            raise
        cls.flow = flow_mod.Flow(cls.cloud, out=cls.transcript.append)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, 'cloud', None):
            logs = os.environ.get('RDT_VIRT_CLOUD_LOGS')
            if logs:
                shutil.copytree(cls.cloud.daemons.log_dir, logs,
                                dirs_exist_ok=True)
            cls.cloud.down()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        if self.skip:
            self.skipTest('; '.join(self.skip))
        self.mark = len(self.transcript)

    def needs_metric_client(self):
        bin_dir = self.cloud.layout.metric_client_bin
        if not os.access(os.path.join(bin_dir, 'openstack'), os.X_OK):
            self.skipTest('no "openstack metric" client in %s (tox -e '
                          'metric-client --notest)' % bin_dir)

    def run_step(self, fn):
        try:
            fn()
        finally:
            self.addDetail('transcript', testtools.content.text_content(
                '\n'.join(self.transcript[self.mark:])))
