-- A price that falls for at least two ticks and then recovers above where
-- it started falling, per symbol, within 10 minutes.
SELECT *
FROM ticker
MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES
        FIRST(DOWN.price) AS start_price,
        LAST(DOWN.price) AS bottom_price,
        UP.price AS end_price,
        COUNT(DOWN.price) AS falls,
        MATCH_ROWTIME() AS end_ts
    ONE ROW PER MATCH
    AFTER MATCH SKIP PAST LAST ROW
    PATTERN (START DOWN{2,} UP) WITHIN INTERVAL '10' MINUTE
    DEFINE
        DOWN AS DOWN.price < PREV(DOWN.price),
        UP AS UP.price > FIRST(DOWN.price)
) AS v_shape
