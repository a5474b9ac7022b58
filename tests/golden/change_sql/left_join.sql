-- input
select a.id, b.label from t1 a left join t2 b on a.k = b.k where a.v > 3 or a.v is null
-- change
SELECT a.id, b.label, `a`.`__w` * `b`.`__w` AS `__w` FROM `t1_d` AS a JOIN `t2_old` AS b ON a.k = b.k WHERE a.v > 3 OR a.v IS NULL
UNION ALL
SELECT a.id, b.label, `a`.`__w` * `b`.`__w` AS `__w` FROM `t1_new` AS a JOIN `t2_d` AS b ON a.k = b.k WHERE a.v > 3 OR a.v IS NULL
UNION ALL
SELECT a.id, b.label, `a`.`__w` * COALESCE(`b`.`__w`, 1) AS `__w` FROM `t1_d` AS a LEFT JOIN `t2_present_new` AS b ON a.k = b.k WHERE (a.v > 3 OR a.v IS NULL) AND `b`.`__w` IS NULL
UNION ALL
SELECT a.id, b.label, `a`.`__w` * COALESCE(`b`.`__w`, 1) AS `__w` FROM `plus(SELECT ``a``.* FROM ``t1_old`` AS a LEFT SEMI JOIN ``t2_d`` AS b ON a.k = b.k)` AS a LEFT JOIN `t2_present_new` AS b ON a.k = b.k WHERE (a.v > 3 OR a.v IS NULL) AND `b`.`__w` IS NULL
UNION ALL
SELECT a.id, b.label, `a`.`__w` * COALESCE(`b`.`__w`, 1) AS `__w` FROM `minus(SELECT ``a``.* FROM ``t1_old`` AS a LEFT SEMI JOIN ``t2_d`` AS b ON a.k = b.k)` AS a LEFT JOIN `t2_present_old` AS b ON a.k = b.k WHERE (a.v > 3 OR a.v IS NULL) AND `b`.`__w` IS NULL
