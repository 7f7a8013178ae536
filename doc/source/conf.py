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

"""Sphinx configuration of the rdt-virt documentation."""

extensions = [
    'sphinx.ext.autodoc',
    'oslo_config.sphinxext',
    'oslo_config.sphinxconfiggen',
    'openstackdocstheme',
]

config_generator_config_file = '../../etc/oslo-config-generator/rdt-virt.conf'
sample_config_basename = '_static/rdt-virt'

openstackdocs_repo_name = 'x/rdt-virt'
openstackdocs_bug_project = 'rdt-virt'
openstackdocs_bug_tag = 'doc'
openstackdocs_auto_name = False

project = 'rdt-virt'
copyright = '2026, The rdt-virt Authors'
master_doc = 'index'
source_suffix = '.rst'
exclude_patterns = []
pygments_style = 'native'
add_module_names = False

html_theme = 'openstackdocs'
html_static_path = ['_static']
htmlhelp_basename = 'rdt-virtdoc'
