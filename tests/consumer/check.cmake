# Installs the build tree into WORK_DIR/prefix, then builds and runs tests/consumer against it.
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${WORK_DIR}/prefix"
                RESULT_VARIABLE code OUTPUT_QUIET)
if(code)
  message(FATAL_ERROR "install failed: ${code}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${WORK_DIR}/build"
                  -G "${GENERATOR}" -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix"
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(code)
  message(FATAL_ERROR "configuring the consumer failed:\n${out}${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build"
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(code)
  message(FATAL_ERROR "building the consumer failed:\n${out}${err}")
endif()
execute_process(COMMAND "${WORK_DIR}/build/consumer" RESULT_VARIABLE code OUTPUT_VARIABLE out)
if(code OR NOT out MATCHES "consumer: rtx-a6000 tf32 ridge 100.8 FLOP/B")
  message(FATAL_ERROR "consumer run failed (${code}): ${out}")
endif()
message(STATUS "${out}")
