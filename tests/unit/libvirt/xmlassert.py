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

"""Compare XML as literal text, after canonicalisation."""

import os
from xml.etree import ElementTree

from tests import base

LIBVIRT_DIR = os.path.join(base.FIXTURES_DIR, 'libvirt')


def canonical(text):
    """C14N 2.0 of ``text``: attribute order, quotes and indentation gone."""
    return ElementTree.canonicalize(xml_data=text, strip_text=True)


def fixture(name):
    """Text of tests/fixtures/libvirt/``name``."""
    with open(os.path.join(LIBVIRT_DIR, name)) as f:
        return f.read()


class XMLTestCase(base.TestCase):

    def assertXMLEqual(self, expected, actual, message=''):
        self.assertEqual(canonical(expected), canonical(actual), message)
