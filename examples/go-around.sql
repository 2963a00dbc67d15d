SELECT *
FROM (
  SELECT
    input.icao24 AS icao24,
    input.on_ground AS on_ground,
    input.vertical_rate AS vertical_rate,
    input.baro_altitude AS baro_altitude,
    record_time
  FROM record
)
MATCH_RECOGNIZE (
    PARTITION BY icao24
    ORDER BY record_time
    MEASURES
        A.icao24 AS aircraft,
        FIRST(A.record_time) AS descent_start,
        LAST(B.baro_altitude) AS lowest_altitude,
        D.baro_altitude AS altitude_after_climb
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (A B+ C{2,}? D) WITHIN INTERVAL '3' MINUTE
    DEFINE
        A AS A.on_ground = FALSE
          AND A.vertical_rate < -1.0
          AND A.baro_altitude < 1500,
        B AS B.on_ground = FALSE
          AND B.vertical_rate < -1.0
          AND (LAST(B.baro_altitude, 1) IS NULL OR B.baro_altitude < LAST(B.baro_altitude, 1)),
        C AS C.on_ground = FALSE
          AND C.vertical_rate > 2.0,
        D AS D.on_ground = FALSE
          AND D.baro_altitude > LAST(C.baro_altitude)
) AS match_result
