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

import importlib.util
import os

import fixtures
from oslo_utils import importutils

from nova_plugin import loader
from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class TestLoader(base.TestCase):

    def setUp(self):
        super().setUp()
        self.virt = self.useFixture(fixtures.TempDir()).path

    def test_install_and_remove(self):
        self.assertEqual('wrote %s' % loader.loader_path(self.virt),
                         loader.install(self.virt))
        path = loader.loader_path(self.virt)
        self.assertTrue(loader.written_by_us(path))
        # The written module loads the driver class.
        spec = importlib.util.spec_from_file_location('rdtvirt_probe', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.assertEqual('nova_plugin.virt.driver',
                         module.RDTLibvirtDriver.__module__)
        # Again: idempotent.
        loader.install(self.virt)
        os.mkdir(os.path.join(self.virt, 'rdtvirt', '__pycache__'))
        open(os.path.join(self.virt, 'rdtvirt', '__pycache__',
                          '__init__.cpython-311.pyc'), 'w').close()
        self.assertEqual('removed %s' % path, loader.remove(self.virt))
        self.assertFalse(os.path.exists(os.path.join(self.virt, 'rdtvirt')))
        self.assertIn('nothing to remove', loader.remove(self.virt))

    def test_foreign_file_is_left_alone(self):
        path = loader.loader_path(self.virt)
        os.makedirs(os.path.dirname(path))
        with open(path, 'w') as f:
            f.write('# installed by pip\n')
        self.assertIn('not written by this command', loader.install(
            self.virt))
        self.assertIn('nothing to remove', loader.remove(self.virt))
        with open(path) as f:
            self.assertEqual('# installed by pip\n', f.read())

    def test_repository_loader_is_the_packaged_one(self):
        # The module a wheel installs re-exports the driver too.
        path = os.path.join(REPO, 'nova', 'virt', 'rdtvirt', '__init__.py')
        spec = importlib.util.spec_from_file_location('rdtvirt_repo', path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.assertIs(importutils.import_class(
            'nova_plugin.virt.driver.RDTLibvirtDriver'),
            module.RDTLibvirtDriver)

    def test_main(self):
        out = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out.stream))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_plugin.loader.nova_virt_dir', lambda: self.virt))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_plugin.loader.find_loader', lambda: None))
        self.assertEqual(0, loader.main(['install']))
        self.assertTrue(os.path.exists(loader.loader_path(self.virt)))
        self.assertEqual(0, loader.main(['remove']))
        self.useFixture(fixtures.MonkeyPatch(
            'nova_plugin.loader.check', lambda: 1 / 0))
        self.assertEqual(1, loader.main(['check']))
