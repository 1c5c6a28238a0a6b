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
if(code OR NOT out MATCHES "consumer: rtx-a6000 tf32 ridge 100.8 FLOP/B"
   OR NOT out MATCHES "profiles from [^\n]*/prefix/share/roofsim: h200-sxm measured")
  message(FATAL_ERROR "consumer run failed (${code}): ${out}")
endif()
message(STATUS "${out}")
# The installed CLI reads the installed profiles too, not the source tree's.
if(EXISTS "${WORK_DIR}/prefix/bin/roofsim")
  execute_process(COMMAND "${WORK_DIR}/prefix/bin/roofsim" predict --model resnet50 --gpu h200-sxm --batch 8
                  RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(code OR NOT out MATCHES "measured on NVIDIA H200")
    message(FATAL_ERROR "the installed roofsim failed (${code}): ${out}${err}")
  endif()
endif()
# What the install holds: the headers, the datasheets and the measured profiles, not the validation data.
if(EXISTS "${WORK_DIR}/prefix/share/roofsim/validation")
  message(FATAL_ERROR "the install holds the validation measurements")
endif()
