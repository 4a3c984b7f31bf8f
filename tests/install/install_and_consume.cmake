# ctest lowbit_install_consumer: `cmake --install` of this build into a scratch prefix, then
# a separate project (tests/install/consumer) finds the package, builds examples/int4_linear.cpp
# against it and runs it. Fails (non-zero) on any step, naming it.
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -P install_and_consume.cmake
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "install_and_consume: -D${v}=... missing")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install_and_consume: ${name} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
step("configure the consumer" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/build
     -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix}
     -DLOWBIT_EXAMPLE_SOURCE=${SOURCE_DIR}/examples/int4_linear.cpp)
step("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("run the consumer" ${WORK_DIR}/build/consumer)
# The example says SKIPPED for its GPU half on a machine without a GPU; this test is about the
# package, which worked, so that word must not make ctest report the test as skipped.
string(REPLACE "SKIPPED:" "(no GPU)" shown "${step_output}")
message(STATUS "installed to ${prefix}; the consumer built against it and ran:\n${shown}")
