-- input
select a.id, b.label from t1 a join t2 b on a.k = b.k
-- change
SELECT a.id, b.label, `a`.`__w` * `b`.`__w` AS `__w` FROM `t1_d` AS a JOIN `t2_old` AS b ON a.k = b.k
UNION ALL
SELECT a.id, b.label, `a`.`__w` * `b`.`__w` AS `__w` FROM `t1_new` AS a JOIN `t2_d` AS b ON a.k = b.k
