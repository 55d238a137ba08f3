module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
  func.func @main(%arg0: tensor<4611686018427387904xf32>, %arg1: tensor<4611686018427387904xf32>, %arg2: tensor<4611686018427387904xf32>, %arg3: tensor<4611686018427387904xf32>) -> tensor<0xf32> {
    %0 = "kiln.concat"(%arg0, %arg1, %arg2, %arg3) {axis = 0} : (tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>, tensor<4611686018427387904xf32>) -> tensor<0xf32>
    return %0 : tensor<0xf32>
  }
}
