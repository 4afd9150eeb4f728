# cmake -DGZIP=gzip -DIN=file -DOUT=file.gz -P OutboxGzip.cmake: compresses IN as
# Debian's tools do (gzip -9n: no name or time stamp, the same bytes every build).
execute_process(COMMAND "${GZIP}" -9n -c "${IN}" OUTPUT_FILE "${OUT}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  file(REMOVE "${OUT}")
  message(FATAL_ERROR "gzip -9n ${IN}: exit ${rc}: ${err}")
endif()
