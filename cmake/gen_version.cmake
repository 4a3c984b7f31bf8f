# Writes OUT = a header defining LOWBIT_GIT_COMMIT (git describe --always --dirty) at build
# time, rewriting it only when the value changes, so benchmark records name the commit the
# binary was built from (a configure-time value goes stale across rebuilds).
execute_process(COMMAND git describe --always --dirty --abbrev=12 WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit unknown)
endif()
set(content "#pragma once\n#define LOWBIT_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUT} "${content}")
endif()
