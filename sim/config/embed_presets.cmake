# Writes OUTPUT from TEMPLATE with the text of each preset CONFIG_DIR/<name>.pbtxt
# as a C++ raw string. Run by the build:
#   cmake -DPRESETS=a,b -DCONFIG_DIR=... -DTEMPLATE=... -DOUTPUT=... -P embed_presets.cmake
set(delimiter "npusim_preset")
set(PRESET_ENTRIES "")
string(REPLACE "," ";" names "${PRESETS}")
foreach(name IN LISTS names)
  set(file "${CONFIG_DIR}/${name}.pbtxt")
  file(READ "${file}" text)
  string(FIND "${text}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${file} contains ')${delimiter}\"', which would end the raw string it is embedded in")
  endif()
  string(APPEND PRESET_ENTRIES
    "    {\"${name}\", \"configs/${name}.pbtxt\", R\"${delimiter}(${text})${delimiter}\"},\n")
endforeach()
# configure_file leaves OUTPUT untouched when nothing changed, so nothing recompiles.
configure_file("${TEMPLATE}" "${OUTPUT}" @ONLY)
